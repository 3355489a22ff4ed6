//! Downloads with a cache: `fetch(url, name)` returns a local path, downloading only once.
//!
//! HTTP(S) goes through the system's `curl` (or `wget` when there is no curl) run as a child
//! process: they bring TLS, proxies (`https_proxy`), redirects and timeouts without adding a TLS
//! stack to lazygrad's dependencies. `file://` URLs are copied directly. A download is written
//! to a temporary file beside its destination and renamed into place only once complete and
//! checked, so the cache never holds a partial file. Checksums are MD5 (`md-5`) or SHA-256
//! (`sha2`).

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sha2::Digest;

use crate::error::{Error, Result};

/// An expected digest of a file, as lowercase or uppercase hex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checksum {
    Md5(String),
    Sha256(String),
}

impl Checksum {
    fn expected(&self) -> String {
        match self {
            Checksum::Md5(h) | Checksum::Sha256(h) => h.trim().to_ascii_lowercase(),
        }
    }
    fn hasher(&self) -> Hasher {
        match self {
            Checksum::Md5(_) => Hasher::Md5(md5::Md5::new()),
            Checksum::Sha256(_) => Hasher::Sha256(sha2::Sha256::new()),
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            Checksum::Md5(_) => "md5",
            Checksum::Sha256(_) => "sha256",
        }
    }
    /// Whether the file at `path` has this digest (`Ok(false)` on a mismatch).
    pub fn matches_file(&self, path: &Path) -> Result<bool> {
        let mut h = self.hasher();
        let mut f = File::open(path)?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        Ok(h.hex() == self.expected())
    }
}

/// Where and how `fetch_with` stores a download.
#[derive(Clone, Debug, Default)]
pub struct FetchOptions {
    /// File name in the cache (a relative path without `..`); default: the MD5 of the URL.
    pub name: Option<String>,
    /// A folder under the cache root to put it in.
    pub subdir: Option<String>,
    /// Verify the file (on download, and on a cache hit: a mismatching cached file is fetched
    /// again).
    pub checksum: Option<Checksum>,
    /// The cache root; default `cache_dir()/downloads`.
    pub root: Option<PathBuf>,
}

/// The local path of `url`, downloaded into `cache_dir()/downloads/` on first use. `name`
/// names the cached file (default: the MD5 of the URL, as tinygrad does).
pub fn fetch(url: &str, name: Option<&str>) -> Result<PathBuf> {
    fetch_with(url, &FetchOptions { name: name.map(str::to_string), ..Default::default() })
}

/// `fetch` with a subfolder, a checksum or another cache root.
pub fn fetch_with(url: &str, opts: &FetchOptions) -> Result<PathBuf> {
    let root = opts.root.clone().unwrap_or_else(|| super::cache::cache_dir().join("downloads"));
    let mut dest = root;
    if let Some(sub) = &opts.subdir {
        dest.push(checked_relative(sub)?);
    }
    match &opts.name {
        Some(n) => dest.push(checked_relative(n)?),
        None => dest.push(md5_hex(url.as_bytes())),
    }
    if dest.is_file() {
        match &opts.checksum {
            None => return Ok(dest),
            Some(c) if c.matches_file(&dest)? => return Ok(dest),
            Some(c) => {
                if super::debug() >= 1 {
                    eprintln!("fetch: cached {} fails its {} check, downloading again", dest.display(), c.kind());
                }
            }
        }
    }
    download(url, &dest, opts.checksum.as_ref())?;
    Ok(dest)
}

/// A relative path with no `..`, root or prefix components.
fn checked_relative(p: &str) -> Result<PathBuf> {
    let path = Path::new(p);
    let ok = !p.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !ok {
        return Err(Error::value("fetch", format!("{p:?} must be a relative path without '..'")));
    }
    Ok(path.to_path_buf())
}

/// Download `url` to `dest` (always; no cache check), verifying `checksum` if given. The data
/// goes to a temporary file beside `dest` that is renamed over it only when complete.
pub fn download(url: &str, dest: &Path, checksum: Option<&Checksum>) -> Result<()> {
    let dir = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let file_name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "download".into());
    let tmp = dir.join(format!(".{file_name}.part-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    let result = download_to_tmp(url, &tmp, &file_name, checksum).and_then(|()| Ok(std::fs::rename(&tmp, dest)?));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn download_to_tmp(url: &str, tmp: &Path, label: &str, checksum: Option<&Checksum>) -> Result<()> {
    let mut sink = Sink {
        file: std::io::BufWriter::new(File::create(tmp)?),
        hasher: checksum.map(Checksum::hasher),
        progress: Progress::new(label),
    };
    if let Some(path) = url.strip_prefix("file://") {
        let mut src = File::open(path).map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{url}: {e}"))))?;
        sink.progress.total = src.metadata().ok().map(|m| m.len());
        sink.copy_from(&mut src)?;
    } else if url.starts_with("http://") || url.starts_with("https://") {
        http_get(url, &mut sink)?;
    } else {
        return Err(Error::value("fetch", format!("unsupported URL {url:?} (want http://, https:// or file://)")));
    }
    sink.progress.finish();
    sink.file.flush()?;
    sink.file.get_ref().sync_all()?;
    if let (Some(c), Some(h)) = (checksum, sink.hasher) {
        let got = h.hex();
        if got != c.expected() {
            return Err(Error::Format(format!(
                "{url}: {} checksum mismatch: expected {}, got {got} ({} bytes downloaded)",
                c.kind(),
                c.expected(),
                sink.progress.done
            )));
        }
    }
    Ok(())
}

/// Where downloaded bytes go: the temp file, the hasher and the progress bar.
struct Sink {
    file: std::io::BufWriter<File>,
    hasher: Option<Hasher>,
    progress: Progress,
}

impl Sink {
    /// Copy `src` to EOF; returns the byte count.
    fn copy_from(&mut self, src: &mut dyn Read) -> Result<u64> {
        let mut buf = vec![0u8; 1 << 16];
        let mut n_total = 0u64;
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            self.file.write_all(&buf[..n])?;
            if let Some(h) = &mut self.hasher {
                h.update(&buf[..n]);
            }
            n_total += n as u64;
            self.progress.advance(n as u64);
        }
        Ok(n_total)
    }
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// GET `url` into `sink` with curl (headers parsed for the size), else wget.
fn http_get(url: &str, sink: &mut Sink) -> Result<()> {
    if have("curl") {
        let mut child = Command::new("curl")
            .args(["--silent", "--show-error", "--fail", "--location", "--include", "--suppress-connect-headers"])
            .args(["--connect-timeout", "30", "--speed-limit", "1024", "--speed-time", "60"])
            .arg("--")
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Device(format!("fetch {url}: could not run curl: {e}")))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut s);
            s
        });
        let mut reader = BufReader::new(stdout);
        let copied = read_headers(&mut reader).and_then(|(status, len)| {
            sink.progress.total = len;
            let n = sink.copy_from(&mut reader)?;
            Ok((status, len, n))
        });
        if copied.is_err() {
            let _ = child.kill();
        }
        let status = child.wait()?;
        let err_text = err_reader.join().unwrap_or_default();
        if !status.success() {
            return Err(network_error(url, "curl", status.code(), &err_text));
        }
        let (http_status, len, n) = copied?;
        if !(200..300).contains(&http_status) {
            return Err(network_error(url, "curl", None, &format!("HTTP status {http_status}")));
        }
        if let Some(len) = len.filter(|&l| l != n) {
            return Err(Error::Format(format!("fetch {url}: got {n} bytes, the server announced {len}")));
        }
        Ok(())
    } else if have("wget") {
        let mut child = Command::new("wget")
            .args(["--quiet", "--output-document=-", "--timeout=60", "--"])
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Device(format!("fetch {url}: could not run wget: {e}")))?;
        let mut stdout = child.stdout.take().expect("piped stdout");
        let copied = sink.copy_from(&mut stdout);
        if copied.is_err() {
            let _ = child.kill();
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stderr).into_owned();
            return Err(network_error(url, "wget", out.status.code(), &text));
        }
        copied.map(|_| ())
    } else {
        Err(Error::Device(format!(
            "fetch {url}: downloading needs curl or wget and neither is installed (apt-get install curl)"
        )))
    }
}

fn network_error(url: &str, tool: &str, code: Option<i32>, text: &str) -> Error {
    let text = text.trim();
    let detail = if text.is_empty() {
        match code {
            Some(c) => format!("{tool} exited with status {c}"),
            None => format!("{tool} was killed"),
        }
    } else {
        text.lines().last().unwrap_or(text).to_string()
    };
    Error::Io(std::io::Error::other(format!("download of {url} failed: {detail}")))
}

/// Read the response header blocks `curl --include --location` prints before the body, up to
/// and including the final response's; returns its status and Content-Length.
fn read_headers(r: &mut impl BufRead) -> Result<(u32, Option<u64>)> {
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            // curl printed nothing: it failed before any response (its exit status says why).
            return Ok((0, None));
        }
        let status: u32 = match line.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
            Some(s) if line.starts_with("HTTP/") => s,
            _ => return Err(Error::Format(format!("fetch: unexpected response line {:?}", line.trim_end()))),
        };
        let (mut len, mut location) = (None, false);
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    len = v.trim().parse().ok();
                } else if k == "location" {
                    location = true;
                }
            }
        }
        let interim = (100..200).contains(&status) || ((300..400).contains(&status) && location);
        if !interim {
            return Ok((status, len));
        }
    }
}

/// A one-line progress bar on stderr, shown on a terminal or at DEBUG>=1.
struct Progress {
    label: String,
    total: Option<u64>,
    done: u64,
    start: Instant,
    last: Option<Instant>,
    tty: bool,
    enabled: bool,
}

impl Progress {
    fn new(label: &str) -> Progress {
        let tty = std::io::stderr().is_terminal();
        Progress {
            label: label.to_string(),
            total: None,
            done: 0,
            start: Instant::now(),
            last: None,
            tty,
            enabled: tty || super::debug() >= 1,
        }
    }
    fn advance(&mut self, n: u64) {
        self.done += n;
        if !self.enabled || !self.tty {
            return;
        }
        if self.last.is_none_or(|t| t.elapsed() >= Duration::from_millis(100)) {
            self.last = Some(Instant::now());
            eprint!("\r{}", self.line());
        }
    }
    fn finish(&self) {
        if self.enabled {
            eprintln!("{}{}", if self.tty { "\r" } else { "" }, self.line());
        }
    }
    fn line(&self) -> String {
        let secs = self.start.elapsed().as_secs_f64().max(1e-3);
        let rate = format!("{}/s", human(self.done as f64 / secs));
        match self.total.filter(|&t| t > 0) {
            Some(t) => {
                let frac = (self.done as f64 / t as f64).min(1.0);
                let filled = (frac * 30.0).round() as usize;
                format!(
                    "{}: [{}{}] {:3.0}% {}/{} {rate}",
                    self.label,
                    "#".repeat(filled),
                    ".".repeat(30 - filled),
                    frac * 100.0,
                    human(self.done as f64),
                    human(t as f64)
                )
            }
            None => format!("{}: {} {rate}", self.label, human(self.done as f64)),
        }
    }
}

/// A byte count for people: `512 B`, `29.5 kB`, `26.4 MB`, `1.2 GB`.
fn human(bytes: f64) -> String {
    match bytes {
        b if b < 1e3 => format!("{b:.0} B"),
        b if b < 1e6 => format!("{:.1} kB", b / 1e3),
        b if b < 1e9 => format!("{:.1} MB", b / 1e6),
        b => format!("{:.2} GB", b / 1e9),
    }
}

// ---- digests ---------------------------------------------------------------------------------

enum Hasher {
    Md5(md5::Md5),
    Sha256(sha2::Sha256),
}

impl Hasher {
    fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
        }
    }
    fn hex(self) -> String {
        match self {
            Hasher::Md5(h) => hex(&h.finalize()),
            Hasher::Sha256(h) => hex(&h.finalize()),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The MD5 digest of `data` as lowercase hex.
pub fn md5_hex(data: &[u8]) -> String {
    hex(&md5::Md5::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::cache::sha256_hex;

    #[test]
    fn digest_vectors() {
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(md5_hex(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(md5_hex(b"The quick brown fox jumps over the lazy dog"), "9e107d9d372bb6826bd81d3542a419d6");
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn headers_skip_redirects() {
        let text = "HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\nHTTP/2 200 \r\ncontent-length: 5\r\n\r\nhello";
        let mut r = std::io::Cursor::new(text.as_bytes());
        assert_eq!(read_headers(&mut r).unwrap(), (200, Some(5)));
        let mut rest = String::new();
        r.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "hello");
    }

    #[test]
    fn names_must_stay_inside_the_cache() {
        assert!(checked_relative("../x").is_err());
        assert!(checked_relative("/etc/passwd").is_err());
        assert!(checked_relative("").is_err());
        assert!(checked_relative("a/b.gz").is_ok());
    }
}
