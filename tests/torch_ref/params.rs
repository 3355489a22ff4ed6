//! A case's parameters: the small JSON object `tools/gen_reference.py` writes, parsed by hand (the
//! crate has no JSON dependency) into [`Params`] with typed accessors for the op table.

use lazygrad::tensor::Scalar;

/// A JSON value. Numbers keep whether they were written as integers, since that decides whether a
/// scalar operand is an `Int` or a `Float` (weak dtype promotion differs).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Json {
        let mut p = Parser { s: text.as_bytes(), pos: 0 };
        let v = p.value();
        p.ws();
        assert_eq!(p.pos, p.s.len(), "trailing characters in JSON {text:?}");
        v
    }
    pub fn as_i64(&self) -> i64 {
        match self {
            Json::Int(i) => *i,
            other => panic!("expected an integer, got {other:?}"),
        }
    }
    pub fn as_f64(&self) -> f64 {
        match self {
            Json::Int(i) => *i as f64,
            Json::Float(f) => *f,
            other => panic!("expected a number, got {other:?}"),
        }
    }
    pub fn as_arr(&self) -> &[Json] {
        match self {
            Json::Arr(a) => a,
            other => panic!("expected a list, got {other:?}"),
        }
    }
    pub fn as_str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("expected a string, got {other:?}"),
        }
    }
    /// This value as a lazygrad scalar operand (ints stay ints, like Python scalars).
    pub fn scalar(&self) -> Scalar {
        match self {
            Json::Bool(b) => Scalar::Bool(*b),
            Json::Int(i) => Scalar::Int(*i),
            Json::Float(f) => Scalar::Float(*f),
            other => panic!("expected a scalar, got {other:?}"),
        }
    }
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn peek(&mut self) -> u8 {
        self.ws();
        *self.s.get(self.pos).unwrap_or_else(|| panic!("unexpected end of JSON"))
    }
    fn expect(&mut self, c: u8) {
        assert_eq!(self.peek(), c, "JSON: expected {:?} at byte {}", c as char, self.pos);
        self.pos += 1;
    }
    fn literal(&mut self, word: &str, v: Json) -> Json {
        assert!(self.s[self.pos..].starts_with(word.as_bytes()), "JSON: bad literal at byte {}", self.pos);
        self.pos += word.len();
        v
    }
    fn value(&mut self) -> Json {
        match self.peek() {
            b'n' => self.literal("null", Json::Null),
            b't' => self.literal("true", Json::Bool(true)),
            b'f' => self.literal("false", Json::Bool(false)),
            b'N' => self.literal("NaN", Json::Float(f64::NAN)),
            b'I' => self.literal("Infinity", Json::Float(f64::INFINITY)),
            b'"' => Json::Str(self.string()),
            b'[' => {
                self.pos += 1;
                let mut items = vec![];
                while self.peek() != b']' {
                    items.push(self.value());
                    if self.peek() == b',' {
                        self.pos += 1;
                    }
                }
                self.pos += 1;
                Json::Arr(items)
            }
            b'{' => {
                self.pos += 1;
                let mut items = vec![];
                while self.peek() != b'}' {
                    let k = self.string();
                    self.expect(b':');
                    items.push((k, self.value()));
                    if self.peek() == b',' {
                        self.pos += 1;
                    }
                }
                self.pos += 1;
                Json::Obj(items)
            }
            _ => self.number(),
        }
    }
    fn string(&mut self) -> String {
        self.expect(b'"');
        let start = self.pos;
        while self.s[self.pos] != b'"' {
            assert_ne!(self.s[self.pos], b'\\', "JSON: escapes are not used by the generator");
            self.pos += 1;
        }
        self.pos += 1;
        String::from_utf8(self.s[start..self.pos - 1].to_vec()).expect("JSON string is UTF-8")
    }
    fn number(&mut self) -> Json {
        let start = self.pos;
        if self.s[self.pos..].starts_with(b"-Infinity") {
            self.pos += 9;
            return Json::Float(f64::NEG_INFINITY);
        }
        while self.pos < self.s.len() && matches!(self.s[self.pos], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).expect("ASCII number");
        match text.parse::<i64>() {
            Ok(i) => Json::Int(i),
            Err(_) => Json::Float(text.parse().unwrap_or_else(|_| panic!("JSON: bad number {text:?}"))),
        }
    }
}

/// The parameters of one case, with accessors that name the key on a mismatch.
pub struct Params(pub Json);

impl Params {
    /// The value under `key`, treating JSON `null` as absent.
    pub fn opt(&self, key: &str) -> Option<&Json> {
        self.0.get(key).filter(|v| **v != Json::Null)
    }
    fn req(&self, key: &str) -> &Json {
        self.opt(key).unwrap_or_else(|| panic!("case parameter {key:?} missing in {:?}", self.0))
    }
    pub fn i(&self, key: &str) -> isize {
        self.req(key).as_i64() as isize
    }
    pub fn u(&self, key: &str) -> usize {
        usize::try_from(self.req(key).as_i64()).unwrap_or_else(|_| panic!("parameter {key:?} is negative"))
    }
    pub fn f(&self, key: &str) -> f64 {
        self.req(key).as_f64()
    }
    /// A float parameter with a default.
    pub fn f_or(&self, key: &str, default: f64) -> f64 {
        self.opt(key).map_or(default, Json::as_f64)
    }
    /// A boolean parameter; absent means `false`.
    pub fn b(&self, key: &str) -> bool {
        matches!(self.opt(key), Some(Json::Bool(true)))
    }
    pub fn s(&self, key: &str) -> &str {
        self.req(key).as_str()
    }
    pub fn scalar(&self, key: &str) -> Scalar {
        self.req(key).scalar()
    }
    pub fn is(&self, key: &str) -> Vec<isize> {
        self.req(key).as_arr().iter().map(|v| v.as_i64() as isize).collect()
    }
    pub fn us(&self, key: &str) -> Vec<usize> {
        self.is(key).into_iter().map(|v| v as usize).collect()
    }
    /// A list of `[a, b]` pairs.
    pub fn pairs(&self, key: &str) -> Vec<(isize, isize)> {
        self.req(key)
            .as_arr()
            .iter()
            .map(|p| (p.as_arr()[0].as_i64() as isize, p.as_arr()[1].as_i64() as isize))
            .collect()
    }
    /// The reduce axes under `axis`: `None` for all of them (JSON null or absent), else the list
    /// (a single integer becomes a one-element list).
    pub fn axis(&self) -> Option<Vec<isize>> {
        self.opt("axis").map(|v| match v {
            Json::Arr(a) => a.iter().map(|x| x.as_i64() as isize).collect(),
            x => vec![x.as_i64() as isize],
        })
    }
    /// A spatial option (conv/pool): an integer or a list of them.
    pub fn spatial(&self, key: &str) -> Option<Vec<usize>> {
        self.opt(key).map(|v| match v {
            Json::Arr(a) => a.iter().map(|x| x.as_i64() as usize).collect(),
            x => vec![x.as_i64() as usize],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Json;

    #[test]
    fn parses_generator_output() {
        let v = Json::parse(r#"{"idx":[[null,null,-1],"new",{"t":1}],"value":2.0,"n":3,"ok":true}"#);
        assert_eq!(v.get("n"), Some(&Json::Int(3)));
        assert_eq!(v.get("value"), Some(&Json::Float(2.0)));
        assert_eq!(v.get("ok"), Some(&Json::Bool(true)));
        let idx = v.get("idx").unwrap().as_arr();
        assert_eq!(idx[0], Json::Arr(vec![Json::Null, Json::Null, Json::Int(-1)]));
        assert_eq!(idx[2].get("t"), Some(&Json::Int(1)));
    }
}
