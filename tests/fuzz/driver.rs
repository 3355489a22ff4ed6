//! Running a fuzzer part: proptest draws choice lists from a seed, each list is checked, and a
//! failing one is shrunk (proptest simplifies the list while it still fails) and printed.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// The seed of CI's programs (`FUZZ_SEED` overrides it).
pub const SEED: u8 = 20;
/// The main part's programs per run (`FUZZ_PROGRAMS` overrides it; the other parts scale with it).
pub const PROGRAMS: usize = 2000;

/// The number in environment variable `name`, else `default`.
pub fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// How many programs a part whose CI count is `count` runs: scaled as `FUZZ_PROGRAMS` scales the
/// main part's 2,000.
pub fn scaled(count: usize) -> usize {
    (count * setting("FUZZ_PROGRAMS", PROGRAMS)).div_ceil(PROGRAMS)
}

/// `count` choice lists of 16 to 160 choices, drawn from `FUZZ_SEED` and the part's `salt` (so
/// that the parts draw different lists).
pub fn draw(count: usize, salt: u8) -> Vec<impl ValueTree<Value = Vec<u16>>> {
    let config = Config { failure_persistence: None, ..Config::default() };
    let mut seed = [setting("FUZZ_SEED", SEED as usize) as u8; 32];
    seed[0] ^= salt;
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let strategy = prop::collection::vec(any::<u16>(), 16..160);
    (0..count).map(|_| strategy.new_tree(&mut runner).expect("a choice list")).collect()
}

/// `f()`, or the message it panicked with.
pub fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
        let message = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
        format!("panic: {}", message.unwrap_or_default())
    })
}

/// `check(list)`, a panic inside it counted as a failure.
pub fn checked(check: &dyn Fn(&[u16]) -> Result<(), String>, list: &[u16]) -> Result<(), String> {
    caught(|| check(list)).and_then(|r| r)
}

/// The simplest list `tree` shrinks to that still fails `check`, as proptest shrinks: simpler
/// lists while they fail, back a step when one passes.
pub fn shrink(tree: &mut impl ValueTree<Value = Vec<u16>>, check: &dyn Fn(&[u16]) -> Result<(), String>) -> Vec<u16> {
    let mut failing = tree.current();
    let mut more = tree.simplify();
    for _ in 0..1000 {
        if !more {
            break;
        }
        more = match checked(check, &tree.current()).is_err() {
            true => {
                failing = tree.current();
                tree.simplify()
            }
            false => tree.complicate(),
        };
    }
    failing
}

/// Run part `name`: its `regressions` first, then `count` drawn lists (salted with `salt`), each
/// through `check`; a failure panics with the shrunk list and its error. Returns how many ran.
pub fn run_part(
    name: &str,
    salt: u8,
    count: usize,
    regressions: &[&[u16]],
    check: &dyn Fn(&[u16]) -> Result<(), String>,
) -> usize {
    for list in regressions {
        checked(check, list).unwrap_or_else(|e| panic!("{name}: regression {list:?}:\n{e}"));
    }
    let mut trees = draw(count, salt);
    for tree in &mut trees {
        if checked(check, &tree.current()).is_err() {
            let failing = shrink(tree, check);
            let err = checked(check, &failing).expect_err("the shrunk list still fails");
            panic!("{name}: a fuzzed program fails; add its choices to the part's regressions:\n{failing:?}\n{err}");
        }
    }
    count
}

/// The devices every part runs on: the CPU, INTERP and, where PoCL or another OpenCL driver
/// opens, CL.
pub fn devices() -> Vec<&'static str> {
    let cl = lazygrad::runtime::get_device("CL");
    if let Err(e) = &cl {
        eprintln!("fuzz: CL does not open ({e}); the parts run on the CPU and INTERP only");
    }
    ["CPU", "INTERP"].into_iter().chain(cl.is_ok().then_some("CL")).collect()
}
