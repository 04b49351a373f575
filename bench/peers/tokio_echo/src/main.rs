//! tokio_echo: the tokio peer echo server of tern's benchmarks (report 003 pingpong, 000 echo,
//! 004 sessions): a task per connection reading into a reused buffer and writing the bytes back.
//! With --tls-cert and --tls-key every connection is served over rustls (tokio-rustls, ring's
//! cryptography, the peer of the "tls" table): the handshake first, then the same loop.
//!
//!   tokio_echo [--host 127.0.0.1] [--port 0] [--threads 1] [--buf 16384]
//!              [--model shared|runtimes] [--duration 0] [--tls-cert FILE --tls-key FILE]
//!
//! --model shared (the default): one runtime; with --threads 1 the current_thread runtime on the
//! main thread, with N > 1 the multi-thread runtime with N workers (work stealing) and one
//! listener. --model runtimes: N current_thread runtimes, each on its own thread with its own
//! SO_REUSEPORT listener on the same port. Prints "tokio_echo: listening on HOST:PORT (...)" once
//! it accepts; stops on SIGINT/SIGTERM or after --duration seconds, exit status 0.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::runtime::{Builder, Runtime};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, Notify};
use tokio_rustls::TlsAcceptor;

const TOKIO_VERSION: &str = "1.54.1";

const USAGE: &str = "\
tokio_echo: a task-per-connection echo server on tokio.
Prints 'tokio_echo: listening on HOST:PORT' when ready; stops on SIGINT/SIGTERM or after
--duration seconds.

Options:
  --host ADDR        IPv4/IPv6 address to listen on (default 127.0.0.1)
  --port N           TCP port (default 0: the kernel picks; printed at start)
  --threads N        worker threads (default 1)
  --buf BYTES        read buffer per connection (default 16384)
  --model M          shared: one runtime (current_thread for 1 thread, else multi_thread with
                     N workers and one listener; the default); runtimes: N current_thread
                     runtimes, each with its own SO_REUSEPORT listener
  --duration SECS    stop after this many seconds (default 0: on a signal)
  --tls-cert FILE    serve TLS (rustls) with this PEM certificate chain (with --tls-key)
  --tls-key FILE     the PEM private key of --tls-cert
  -h, --help         print this help";

#[derive(Clone)]
struct Config {
    host: String,
    port: u16,
    threads: usize,
    buf: usize,
    model: String,
    duration: f64,
    tls_cert: String,
    tls_key: String,
}

// Reads the command line; Err carries the message for stderr (empty for --help).
fn parse_args() -> Result<Config, String> {
    let mut config = Config {
        host: "127.0.0.1".into(),
        port: 0,
        threads: 1,
        buf: 16 * 1024,
        model: "shared".into(),
        duration: 0.0,
        tls_cert: String::new(),
        tls_key: String::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        if name == "-h" || name == "--help" {
            return Err(String::new());
        }
        const OPTIONS: [&str; 12] = [
            "--host",
            "--port",
            "-p",
            "--threads",
            "-t",
            "--buf",
            "--block",
            "-b",
            "--model",
            "--duration",
            "--tls-cert",
            "--tls-key",
        ];
        if !OPTIONS.contains(&name.as_str()) {
            return Err(format!("unknown option {name}"));
        }
        let value = match inline.or_else(|| args.next()) {
            Some(v) => v,
            None => return Err(format!("{name} needs a value")),
        };
        let bad = |_| format!("{name}: bad value {value:?}");
        match name.as_str() {
            "--host" => config.host = value.clone(),
            "--port" | "-p" => config.port = value.parse().map_err(bad)?,
            "--threads" | "-t" => config.threads = value.parse().map_err(bad)?,
            "--buf" | "--block" | "-b" => config.buf = value.parse().map_err(bad)?,
            "--model" => config.model = value.clone(),
            "--tls-cert" => config.tls_cert = value.clone(),
            "--tls-key" => config.tls_key = value.clone(),
            "--duration" => {
                config.duration = value
                    .parse()
                    .map_err(|_| format!("{name}: bad value {value:?}"))?
            }
            _ => return Err(format!("unknown option {name}")),
        }
    }
    if config.model != "shared" && config.model != "runtimes" {
        return Err(format!(
            "--model {}: expected shared or runtimes",
            config.model
        ));
    }
    if config.tls_cert.is_empty() != config.tls_key.is_empty() {
        return Err("--tls-cert and --tls-key go together".into());
    }
    config.threads = config.threads.max(1);
    config.buf = config.buf.max(1);
    Ok(config)
}

// Writes back every byte it reads until the peer closes or resets the connection; true when the
// peer closed cleanly (end of stream; over TLS, its close_notify).
async fn echo<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, buf_size: usize) -> bool {
    let mut buf = vec![0u8; buf_size];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => return true,
            Err(_) => return false,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return false;
                }
            }
        }
    }
}

// One accepted connection: plaintext, or the TLS handshake and then the echo over TLS.
async fn serve(stream: TcpStream, buf_size: usize, tls: Option<TlsAcceptor>) {
    let _ = stream.set_nodelay(true);
    match tls {
        // Dropping the socket closes it: no shutdown() system call per session.
        None => {
            let mut stream = stream;
            echo(&mut stream, buf_size).await;
        }
        Some(acceptor) => {
            if let Ok(mut stream) = acceptor.accept(stream).await {
                if echo(&mut stream, buf_size).await {
                    let _ = stream.shutdown().await; // answers close_notify with ours
                }
            }
        }
    }
}

// The acceptor of --tls-cert/--tls-key: rustls's defaults (TLS 1.2 and 1.3, X25519 first) on
// ring, with stateless session tickets as OpenSSL and Go issue them.
fn tls_acceptor(cert: &str, key: &str) -> Result<TlsAcceptor, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .map_err(|e| format!("--tls-cert {cert}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("--tls-cert {cert}: no certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--tls-key {key}: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
    config.ticketer =
        rustls::crypto::ring::Ticketer::new().map_err(|e| format!("session tickets: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

// Accepts forever, spawning a task per connection on the current runtime.
async fn accept_loop(listener: TcpListener, buf_size: usize, tls: Option<TlsAcceptor>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve(stream, buf_size, tls.clone()));
            }
            // Out of descriptors or an aborted handshake: back off briefly, keep serving.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

// A listener on `addr`, with SO_REUSEPORT when several runtimes share the port.
fn bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(1024)
}

// Resolves once SIGINT or SIGTERM arrives, or after `duration` seconds when positive.
async fn stop_requested(duration: f64) -> std::io::Result<()> {
    let notify = Arc::new(Notify::new());
    for kind in [SignalKind::interrupt(), SignalKind::terminate()] {
        let mut stream = signal(kind)?;
        let notify = notify.clone();
        tokio::spawn(async move {
            stream.recv().await;
            notify.notify_one();
        });
    }
    if duration > 0.0 {
        let notify = notify.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(duration)).await;
            notify.notify_one();
        });
    }
    notify.notified().await;
    Ok(())
}

fn runtime(threads: usize) -> std::io::Result<Runtime> {
    if threads == 1 {
        Builder::new_current_thread().enable_all().build()
    } else {
        Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
}

fn announce(addr: SocketAddr, config: &Config, how: &str) {
    println!(
        "tokio_echo: listening on {}:{} ({} thread{}, {}, buf {}, tokio {}{})",
        addr.ip(),
        addr.port(),
        config.threads,
        if config.threads == 1 { "" } else { "s" },
        how,
        config.buf,
        TOKIO_VERSION,
        if config.tls_cert.is_empty() {
            ""
        } else {
            ", rustls"
        }
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

// One runtime, one listener: current_thread for 1 thread, multi_thread otherwise.
fn run_shared(config: &Config, addr: SocketAddr, tls: Option<TlsAcceptor>) -> std::io::Result<()> {
    let rt = runtime(config.threads)?;
    let how = if config.threads == 1 {
        "current_thread runtime"
    } else {
        "multi_thread runtime"
    };
    rt.block_on(async {
        let listener = bind(addr, false)?;
        let local = listener.local_addr()?;
        let buf = config.buf;
        let stop = tokio::spawn(stop_requested(config.duration));
        announce(local, config, how);
        let accept = tokio::spawn(accept_loop(listener, buf, tls));
        let result = stop.await.unwrap_or(Ok(()));
        accept.abort();
        result
    })
    // Dropping the runtime cancels every connection task, which closes its socket.
}

// N current_thread runtimes, each on its own thread with its own SO_REUSEPORT listener.
fn run_runtimes(
    config: &Config,
    addr: SocketAddr,
    tls: Option<TlsAcceptor>,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut local = addr;
    let mut threads = Vec::new();
    for _ in 0..config.threads {
        let rt = runtime(1)?;
        // Registered with the runtime that will run it, on the thread that will own both.
        let listener = rt.block_on(async { bind(local, true) })?;
        local = listener.local_addr()?;
        let mut stop_rx = stop_rx.clone();
        let buf = config.buf;
        let tls = tls.clone();
        threads.push(std::thread::spawn(move || {
            rt.block_on(async move {
                let accept = tokio::spawn(accept_loop(listener, buf, tls));
                let _ = stop_rx.wait_for(|stop| *stop).await;
                accept.abort();
            });
        }));
    }
    let rt = runtime(1)?;
    let result = rt.block_on(async {
        let stop = tokio::spawn(stop_requested(config.duration));
        announce(local, config, "a current_thread runtime per thread");
        stop.await.unwrap_or(Ok(()))
    });
    let _ = stop_tx.send(true);
    for thread in threads {
        let _ = thread.join();
    }
    result
}

// Lifts the soft limit on open descriptors to the hard limit, so that thousands of sessions fit.
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn main() -> ExitCode {
    let config = match parse_args() {
        Ok(config) => config,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("tokio_echo: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let ip: std::net::IpAddr = match config.host.parse() {
        Ok(ip) => ip,
        Err(_) => {
            eprintln!("tokio_echo: --host {}: not an IP address", config.host);
            return ExitCode::from(2);
        }
    };
    let tls = if config.tls_cert.is_empty() {
        None
    } else {
        match tls_acceptor(&config.tls_cert, &config.tls_key) {
            Ok(acceptor) => Some(acceptor),
            Err(message) => {
                eprintln!("tokio_echo: {message}");
                return ExitCode::from(2);
            }
        }
    };
    raise_fd_limit();
    let addr = SocketAddr::new(ip, config.port);
    let result = if config.model == "runtimes" && config.threads > 1 {
        run_runtimes(&config, addr, tls)
    } else {
        run_shared(&config, addr, tls)
    };
    match result {
        Ok(()) => {
            println!("tokio_echo: stopped");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("tokio_echo: {error}");
            ExitCode::FAILURE
        }
    }
}
