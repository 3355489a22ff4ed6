//! A minimal HTTP server for the explorer: the page, its vendored scripts, the trace as JSON and
//! any recorded graph as DOT. GET only, one thread per connection, `Connection: close`.

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use super::export::{changed_nodes, graph_to_dot, to_json};
use crate::uop::trace::Trace;

const INDEX_HTML: &str = include_str!("web/index.html");
const VIZ_JS: &str = include_str!("web/viz.js");
const DAGRE_JS: &str = include_str!("web/vendor/dagre.min.js");

/// Listen on `127.0.0.1:port` (0 picks a free port).
pub fn bind(port: i64) -> io::Result<TcpListener> {
    let port = u16::try_from(port).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a port number"))?;
    TcpListener::bind(("127.0.0.1", port))
}

/// Serve the explorer for `trace` on `listener`; returns only when the process ends.
pub fn serve(listener: TcpListener, trace: Trace) {
    let site = Arc::new(Site { json: to_json(&trace), trace });
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            // e.g. out of file descriptors: wait a little instead of spinning
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let site = site.clone();
        std::thread::spawn(move || {
            // a client that goes away mid-request is its own problem
            let _ = site.answer(stream);
        });
    }
}

/// What the server hands out.
struct Site {
    trace: Trace,
    json: String,
}

/// A response: status line, content type, body.
type Response<'a> = (&'static str, &'static str, std::borrow::Cow<'a, str>);

impl Site {
    fn answer(&self, stream: TcpStream) -> io::Result<()> {
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut reader = BufReader::new(&stream);
        let mut request_line = String::new();
        reader.read_line(&mut request_line)?;
        // skip the headers
        let mut header = String::new();
        while reader.read_line(&mut header)? > 2 {
            header.clear();
        }
        let target = request_line.split_whitespace().nth(1).unwrap_or("/");
        let (status, content_type, body) = self.route(target);
        let mut out = &stream;
        write!(
            out,
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            body.len()
        )?;
        out.write_all(body.as_bytes())?;
        out.flush()
    }

    fn route(&self, target: &str) -> Response<'_> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        const JS: &str = "application/javascript; charset=utf-8";
        match path {
            "/" | "/index.html" => ("200 OK", "text/html; charset=utf-8", INDEX_HTML.into()),
            "/viz.js" => ("200 OK", JS, VIZ_JS.into()),
            "/vendor/dagre.min.js" => ("200 OK", JS, DAGRE_JS.into()),
            "/trace.json" => ("200 OK", "application/json", self.json.as_str().into()),
            "/dot" => match self.dot(query) {
                Some(dot) => ("200 OK", "text/vnd.graphviz; charset=utf-8", dot.into()),
                None => ("400 Bad Request", "text/plain", "usage: /dot?root=ID[&prev=ID]\n".into()),
            },
            _ => ("404 Not Found", "text/plain", "not found\n".into()),
        }
    }

    /// `/dot?root=ID[&prev=ID]`: the graph at `root`, with the nodes `prev`'s graph lacks outlined.
    fn dot(&self, query: &str) -> Option<String> {
        let param = |key: &str| {
            query
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.parse::<u32>().ok())
        };
        let valid = |id: u32| (id as usize) < self.trace.nodes.len();
        let root = param("root").filter(|&r| valid(r))?;
        let changed = match param("prev") {
            Some(prev) if valid(prev) => changed_nodes(&self.trace, root, prev),
            _ => HashSet::new(),
        };
        Some(graph_to_dot(&self.trace, root, &format!("node {root}"), &changed))
    }
}
