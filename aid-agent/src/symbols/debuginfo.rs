//! Separate debug information for binaries as they ship (stripped): found
//! the way gdb and the distributions' `-dbg`/`-debuginfo` packages lay it
//! out — by build-id (`ROOT/.build-id/xx/yyyy.debug`), by `.gnu_debuglink`
//! (next to the binary, in its `.debug/` directory, or under `ROOT` at the
//! binary's directory; the CRC must match), and from a debuginfod server
//! when `DEBUGINFOD_URLS` is set (`URL/buildid/HEX/debuginfo`, cached as
//! debuginfod clients cache it).

use std::{
    io::{Read as _, Write as _},
    net::{TcpStream, ToSocketAddrs as _},
    path::{Path, PathBuf},
    time::Duration,
};

use object::Object as _;

/// The default debug root, as gdb's `debug-file-directory`.
pub const DEFAULT_ROOT: &str = "/usr/lib/debug";

/// How long one debuginfod request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where separate debug files are looked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugSearch {
    /// `--debug-root` (default /usr/lib/debug).
    pub root: PathBuf,
    /// `DEBUGINFOD_URLS`, split at whitespace.
    pub servers: Vec<String>,
    /// Where downloaded files are kept.
    pub cache: PathBuf,
}

impl Default for DebugSearch {
    /// The default root, and debuginfod as the environment configures it.
    fn default() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        DebugSearch {
            root: PathBuf::from(DEFAULT_ROOT),
            servers: var("DEBUGINFOD_URLS")
                .map(|v| v.to_string_lossy().split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
            cache: cache_dir(
                var("DEBUGINFOD_CACHE_PATH").map(PathBuf::from),
                var("XDG_CACHE_HOME").map(PathBuf::from),
                var("HOME").map(PathBuf::from),
            ),
        }
    }
}

impl DebugSearch {
    /// Under `root`, debuginfod as the environment configures it.
    pub fn with_root(root: PathBuf) -> DebugSearch {
        DebugSearch { root, ..DebugSearch::default() }
    }
}

/// The debuginfod client cache directory: `$DEBUGINFOD_CACHE_PATH`, else
/// `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`
/// (what elfutils' client uses, so both share downloads).
pub fn cache_dir(
    explicit: Option<PathBuf>,
    xdg: Option<PathBuf>,
    home: Option<PathBuf>,
) -> PathBuf {
    explicit
        .or_else(|| xdg.map(|x| x.join("debuginfod_client")))
        .or_else(|| home.map(|h| h.join(".cache/debuginfod_client")))
        .unwrap_or_else(|| PathBuf::from("/var/cache/debuginfod_client"))
}

/// How a debug file was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    BuildId,
    DebugLink,
    /// Downloaded from (or cached for) this server.
    Debuginfod(String),
}

/// A separate debug file, read.
pub struct DebugFile {
    pub path: PathBuf,
    pub how: Found,
    pub data: Vec<u8>,
}

/// What identifies a binary's debug file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    pub build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: file name and CRC-32 of the debug file.
    pub debuglink: Option<(String, u32)>,
}

impl Identity {
    pub fn of(file: &object::File<'_>) -> Identity {
        Identity {
            build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
            debuglink: file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc)),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `ROOT/.build-id/xx/yyyy.debug` for a build-id.
pub fn build_id_path(root: &Path, id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    if rest.is_empty() {
        return None;
    }
    Some(root.join(".build-id").join(format!("{first:02x}")).join(format!("{}.debug", hex(rest))))
}

/// Where `.gnu_debuglink`'s file may be, for a binary at `binary`: next to
/// it, in `.debug/` next to it, and under `root` at the binary's directory.
pub fn debuglink_paths(root: &Path, binary: &Path, name: &str) -> Vec<PathBuf> {
    let dir = binary.parent().unwrap_or(Path::new("/"));
    let under_root = root.join(dir.strip_prefix("/").unwrap_or(dir)).join(name);
    vec![dir.join(name), dir.join(".debug").join(name), under_root]
}

/// The debuginfod URL of a build-id's debug file on `server`.
pub fn debuginfod_url(server: &str, id: &[u8]) -> String {
    format!("{}/buildid/{}/debuginfo", server.trim_end_matches('/'), hex(id))
}

/// Where a downloaded debug file is cached.
pub fn cache_path(cache: &Path, id: &[u8]) -> PathBuf {
    cache.join(hex(id)).join("debuginfo")
}

/// Finds the debug file of the binary at `binary` (read at `binary`, a
/// path the agent can open), or None.
pub fn find(search: &DebugSearch, binary: &Path, id: &Identity) -> Option<DebugFile> {
    let matches_id = |data: &[u8]| {
        let Some(want) = &id.build_id else { return true };
        object::File::parse(data).ok().and_then(|f| f.build_id().ok().flatten().map(<[u8]>::to_vec))
            == Some(want.clone())
    };
    if let Some(build_id) = &id.build_id
        && let Some(path) = build_id_path(&search.root, build_id)
        && let Ok(data) = std::fs::read(&path)
        && matches_id(&data)
    {
        return Some(DebugFile { path, how: Found::BuildId, data });
    }
    if let Some((name, crc)) = &id.debuglink {
        for path in debuglink_paths(&search.root, binary, name) {
            if path == binary {
                continue;
            }
            if let Ok(data) = std::fs::read(&path)
                && crc32fast::hash(&data) == *crc
            {
                return Some(DebugFile { path, how: Found::DebugLink, data });
            }
        }
    }
    let build_id = id.build_id.as_ref()?;
    let cached = cache_path(&search.cache, build_id);
    for server in &search.servers {
        if let Ok(data) = std::fs::read(&cached)
            && matches_id(&data)
        {
            return Some(DebugFile { path: cached, how: Found::Debuginfod(server.clone()), data });
        }
        match fetch(&debuginfod_url(server, build_id)) {
            Ok(data) if matches_id(&data) => {
                if let Some(dir) = cached.parent() {
                    let _ = std::fs::create_dir_all(dir);
                    let _ = std::fs::write(&cached, &data);
                }
                return Some(DebugFile {
                    path: cached,
                    how: Found::Debuginfod(server.clone()),
                    data,
                });
            }
            Ok(_) => log::warn!("{server}: the debug file it sent has another build-id"),
            Err(e) => log::info!("debuginfod {server}: {e}"),
        }
    }
    None
}

/// An `http://` URL split into host, port and path.
fn split_http(url: &str) -> Result<(String, u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        "only http:// debuginfod servers are supported (no TLS client is built in): use an http:// mirror or fetch with debuginfod-find into the cache".to_owned()
    })?;
    let (authority, path) =
        rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_owned(), p.parse().map_err(|_| format!("bad port in {url}"))?),
        None => (authority.to_owned(), 80),
    };
    Ok((host, port, path))
}

/// A plain HTTP/1.0 GET, bounded by [`FETCH_TIMEOUT`] per step; the body
/// of a 200 answer.
fn fetch(url: &str) -> Result<Vec<u8>, String> {
    let (host, port, path) = split_http(url)?;
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, FETCH_TIMEOUT).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(FETCH_TIMEOUT)).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(FETCH_TIMEOUT)).map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: aid-agent\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.take(1 << 30).read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no HTTP header")?;
    let head = String::from_utf8_lossy(&answer[..end]);
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("{url}: HTTP {status}"));
    }
    Ok(answer[end + 4..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths_split_the_first_byte() {
        assert_eq!(
            build_id_path(Path::new("/usr/lib/debug"), &[0xab, 0xcd, 0x01]),
            Some(PathBuf::from("/usr/lib/debug/.build-id/ab/cd01.debug"))
        );
        assert_eq!(build_id_path(Path::new("/d"), &[0xab]), None);
    }

    #[test]
    fn debuglink_is_looked_for_where_gdb_looks() {
        assert_eq!(
            debuglink_paths(Path::new("/dbg"), Path::new("/opt/app/bin/server"), "server.debug"),
            vec![
                PathBuf::from("/opt/app/bin/server.debug"),
                PathBuf::from("/opt/app/bin/.debug/server.debug"),
                PathBuf::from("/dbg/opt/app/bin/server.debug"),
            ]
        );
    }

    #[test]
    fn debuginfod_urls_and_cache_paths() {
        assert_eq!(
            debuginfod_url("http://debuginfod.example/", &[0x12, 0x3f]),
            "http://debuginfod.example/buildid/123f/debuginfo"
        );
        assert_eq!(
            cache_path(Path::new("/home/u/.cache/debuginfod_client"), &[0x12, 0x3f]),
            PathBuf::from("/home/u/.cache/debuginfod_client/123f/debuginfo")
        );
        assert_eq!(
            cache_dir(None, Some("/x".into()), Some("/home/u".into())),
            PathBuf::from("/x/debuginfod_client")
        );
        assert_eq!(cache_dir(Some("/c".into()), Some("/x".into()), None), PathBuf::from("/c"));
        assert_eq!(
            cache_dir(None, None, Some("/home/u".into())),
            PathBuf::from("/home/u/.cache/debuginfod_client")
        );
        assert_eq!(
            split_http("http://h.example:8002/buildid/ab/debuginfo").unwrap(),
            ("h.example".to_owned(), 8002, "/buildid/ab/debuginfo".to_owned())
        );
        assert!(split_http("https://h.example/x").unwrap_err().starts_with("only http://"));
    }

    /// A local server stands in for debuginfod: the request line the
    /// client sends, and the body of the answer.
    #[test]
    fn fetch_gets_the_body_of_a_200_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 512];
            while !request.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the request ends with an empty line");
                request.extend_from_slice(&buf[..n]);
            }
            s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
            String::from_utf8_lossy(&request).lines().next().unwrap().to_owned()
        });
        let body = fetch(&format!("http://127.0.0.1:{port}/buildid/ab/debuginfo")).unwrap();
        assert_eq!(body, b"hello");
        assert_eq!(server.join().unwrap(), "GET /buildid/ab/debuginfo HTTP/1.0");
    }
}
