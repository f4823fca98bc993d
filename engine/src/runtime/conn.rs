//! One client connection: read frames, decode, dispatch, and write responses in request order.
//!
//! A request is started as soon as its frame is cut and run until it first has to wait. Most
//! requests (a heartbeat to a group on this shard, ApiVersions, Metadata) finish right there:
//! their response is encoded straight into the connection's output buffer, with no task, no
//! queue slot and no allocation of its own. A request that has to wait (a cross-shard call, a
//! JoinGroup parked for its join phase, a commit waiting for its fsync, a topic creation) becomes
//! its own task, so it does not stop the next request from being decoded; its place in the
//! response order is a slot in the connection's queue.
//!
//! Responses leave in the order requests arrived, because Kafka clients match them by position
//! as much as by correlation id: encoded bytes go to the output buffer only while no earlier
//! request is still waiting, otherwise into a slot behind it. Everything that is finished is
//! written with one system call: the reader writes the buffer itself after each read when the
//! writer is idle, and the writer task takes whatever has accumulated (plus every finished slot
//! at the head of the queue) while a write or a waiting request held things up. Requests decoded
//! but not yet answered are bounded per connection, in number (`MAX_IN_FLIGHT`) and in request
//! bytes (`MAX_IN_FLIGHT_BYTES`): past either bound the reader stops cutting frames and reading
//! the socket, so further requests wait in the socket (and then in the client), which bounds
//! memory and pushes back on a client that pipelines faster than it is answered. A request that
//! waits for its partition (a write behind a storm, see `partition_core::MAX_QUEUED_BYTES`)
//! keeps its place under both bounds. The requests waiting across all of a shard's connections
//! are bounded too (`shard::Backlog`, as Kafka bounds its request queue with `queued.max.requests`):
//! 100,000 members that all send at once, 100 to a connection, would otherwise hold 64 waiting
//! requests on each of 1,000 connections.
//!
//! `connections.max.idle.ms` is checked by one sweep per shard (`shard::ConnRegistry`), which
//! ends the reads of a connection that completed no request for that long; nothing is armed per
//! read.
//!
//! A connection of an SSL or SASL_SSL listener is TLS (rustls, on this shard): the handshake
//! runs first, bounded like any idle connection by `connections.max.idle.ms` (the sweep shuts the
//! socket down under it) and by the connection limits, holding nothing shared. The stream is an
//! enum, so the PLAINTEXT path reads and writes the socket directly. On a SASL listener the
//! connection authenticates before anything else is served, as Kafka's
//! `SaslServerAuthenticator` (`clients/src/main/java/org/apache/kafka/common/security/
//! authenticator/SaslServerAuthenticator.java`) does, and re-authenticates in place (KIP-368).
//!
//! Bad input closes the connection with one log line (Kafka closes on a bad frame or an
//! unsupported version too), after the responses to earlier requests have been written.

use crate::runtime::shard::{Caller, Handled, Shard};
use bytes::{Buf, BytesMut};
use futures_lite::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use wire::{api_versions, decode_request_ref, encode_response, Request, RequestHeader, Response};

const JOIN_GROUP: i16 = kafka_protocol::messages::ApiKey::JoinGroup as i16;
const SASL_HANDSHAKE: i16 = kafka_protocol::messages::ApiKey::SaslHandshake as i16;
const SASL_AUTHENTICATE: i16 = kafka_protocol::messages::ApiKey::SaslAuthenticate as i16;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// A connection's byte stream: the socket itself, or TLS over it. An enum rather than a trait
/// object so the PLAINTEXT path stays a direct call on the socket.
enum Stream {
    Plain(TcpStream),
    Tls(Box<futures_rustls::server::TlsStream<TcpStream>>),
}

impl Stream {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<std::io::Result<usize>> {
        match self {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    /// TLS buffers what it encrypts; a write is done once it reached the socket.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self {
            Stream::Plain(_) => Poll::Ready(Ok(())),
            Stream::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(&mut **s).poll_close(cx),
        }
    }
}
const SYNC_GROUP: i16 = kafka_protocol::messages::ApiKey::SyncGroup as i16;

/// Requests decoded but not yet answered on one connection.
pub const MAX_IN_FLIGHT: usize = 64;

/// Bytes of request frames decoded but not yet answered on one connection. One request is always
/// let in when none is in flight, whatever its size (`socket.request.max.bytes` bounds that).
/// Kafka itself reads one request per connection at a time (`SocketServer` mutes a channel
/// until its response is sent); 1 MiB still lets a producer pipeline its usual batches.
pub const MAX_IN_FLIGHT_BYTES: usize = 1 << 20;

/// Bytes read per system call. Kept small because every connection owns one such buffer (plus
/// its frame buffer): at 10,000 connections 64 KiB each was most of the broker's memory.
const READ_CHUNK: usize = 16 * 1024;

/// Output buffers larger than this are given back after use, so one large response does not
/// pin its memory to the connection.
const KEEP_OUT_BUFFER: usize = 64 * 1024;

/// What a request that had to wait produced, for the writer.
enum Outcome {
    Frame(BytesMut),
    /// The request needs no response (Produce with acks=0).
    Nothing,
    Close,
}

/// One place in the response order behind a request that is still waiting.
/// Each request slot carries its request's frame length, given back when it is written.
enum Slot {
    /// Encoded while an earlier request was still waiting.
    Frame(BytesMut, usize),
    /// A request that had to wait, running as its own task.
    Waiting(glommio::Task<Outcome>, usize),
    /// Close the connection once everything before it is written.
    Close,
}

/// The state a connection's reader and writer share.
struct Conn {
    stream: RefCell<Stream>,
    /// Encoded responses ready to be written. They precede every slot of `queue`: bytes are only
    /// appended here while the queue is empty.
    out: RefCell<BytesMut>,
    /// Requests whose responses are in `out`, and their frame bytes (for the in-flight bounds).
    out_requests: Cell<usize>,
    out_bytes: Cell<usize>,
    queue: RefCell<VecDeque<Slot>>,
    /// Requests decoded whose responses are not yet written (or dropped), and their frame bytes.
    unanswered: Cell<usize>,
    unanswered_bytes: Cell<usize>,
    /// The writer holds a batch it is writing: nobody else may write.
    writing: Cell<bool>,
    /// TLS holds encrypted bytes the socket did not take yet: the writer must flush them.
    needs_flush: Cell<bool>,
    reader_done: Cell<bool>,
    writer_done: Cell<bool>,
    writer_waker: Cell<Option<Waker>>,
    reader_waker: Cell<Option<Waker>>,
}

impl Conn {
    fn wake_writer(&self) {
        if let Some(w) = self.writer_waker.take() {
            w.wake();
        }
    }

    fn wake_reader(&self) {
        if let Some(w) = self.reader_waker.take() {
            w.wake();
        }
    }

    /// A request of `bytes` is decoded and counts against the in-flight bounds.
    fn begin(&self, bytes: usize) {
        self.unanswered.set(self.unanswered.get() + 1);
        self.unanswered_bytes
            .set(self.unanswered_bytes.get() + bytes);
    }

    /// `requests` requests of `bytes` in all are answered (written, or need no answer).
    fn answered(&self, requests: usize, bytes: usize) {
        self.unanswered.set(self.unanswered.get() - requests);
        self.unanswered_bytes
            .set(self.unanswered_bytes.get() - bytes);
    }

    /// Whether a request of `bytes` must wait for earlier ones to be answered first.
    fn full(&self, bytes: usize) -> bool {
        let n = self.unanswered.get();
        n >= MAX_IN_FLIGHT || (n > 0 && self.unanswered_bytes.get() + bytes > MAX_IN_FLIGHT_BYTES)
    }

    /// A response is in `out`.
    fn add_out(&self, bytes: usize) {
        self.out_requests.set(self.out_requests.get() + 1);
        self.out_bytes.set(self.out_bytes.get() + bytes);
    }

    /// Queue a finished response (to a request of `bytes`) behind everything before it; `None`
    /// (no response) is done.
    fn push_done(&self, frame: Option<BytesMut>, bytes: usize) {
        let Some(f) = frame else {
            self.answered(1, bytes);
            return;
        };
        let mut queue = self.queue.borrow_mut();
        if queue.is_empty() {
            self.out.borrow_mut().extend_from_slice(&f);
            self.add_out(bytes);
        } else {
            queue.push_back(Slot::Frame(f, bytes));
        }
    }

    /// Try to write `out` from the reader's task when nothing else is writing: most of the time
    /// this sends every response of one read with one system call and the writer task never
    /// runs. Whatever is left is the writer's.
    fn flush_from_reader(&self, cx: &mut Context<'_>) {
        let pending = {
            let mut out = self.out.borrow_mut();
            if !self.queue.borrow().is_empty() {
                // Waiting requests are the writer's to await (it may not have seen them yet).
                true
            } else if out.is_empty() {
                false
            } else if self.writing.get() {
                true
            } else {
                let mut stream = self.stream.borrow_mut();
                if let Poll::Ready(Ok(n)) = stream.poll_write(cx, &out) {
                    out.advance(n);
                }
                // TLS: what is encrypted but not yet on the socket is the writer's to push.
                let flushed = matches!(stream.poll_flush(cx), Poll::Ready(Ok(())));
                if out.is_empty() && !flushed {
                    self.answered(self.out_requests.replace(0), self.out_bytes.replace(0));
                    self.needs_flush.set(true);
                    true
                } else if out.is_empty() {
                    self.answered(self.out_requests.replace(0), self.out_bytes.replace(0));
                    if out.capacity() > KEEP_OUT_BUFFER {
                        *out = BytesMut::new();
                    } else {
                        out.clear();
                    }
                    false
                } else {
                    true
                }
            }
        };
        if pending {
            self.wake_writer();
        }
    }

    /// Move everything finished, in order, into `batch`. Ready with (requests taken, their frame
    /// bytes, close after writing); pending while nothing is finished.
    fn gather(&self, cx: &mut Context<'_>, batch: &mut BytesMut) -> Poll<(usize, usize, bool)> {
        let mut taken = 0;
        let mut taken_bytes = 0;
        {
            let mut out = self.out.borrow_mut();
            if !out.is_empty() {
                if batch.is_empty() {
                    std::mem::swap(&mut *out, batch);
                } else {
                    batch.extend_from_slice(&out);
                    out.clear();
                }
            }
            taken += self.out_requests.replace(0);
            taken_bytes += self.out_bytes.replace(0);
        }
        let mut queue = self.queue.borrow_mut();
        loop {
            let (outcome, bytes) = match queue.front_mut() {
                None => break,
                Some(Slot::Frame(f, bytes)) => (Outcome::Frame(std::mem::take(f)), *bytes),
                Some(Slot::Close) => (Outcome::Close, 0),
                Some(Slot::Waiting(task, bytes)) => match Pin::new(task).poll(cx) {
                    Poll::Ready(o) => (o, *bytes),
                    Poll::Pending => break,
                },
            };
            queue.pop_front();
            taken += 1;
            taken_bytes += bytes;
            match outcome {
                Outcome::Frame(f) => batch.extend_from_slice(&f),
                Outcome::Nothing => {}
                Outcome::Close => return Poll::Ready((taken, taken_bytes, true)),
            }
        }
        if taken > 0 || !batch.is_empty() || self.needs_flush.take() {
            return Poll::Ready((taken, taken_bytes, false));
        }
        if queue.is_empty() && self.reader_done.get() {
            return Poll::Ready((0, 0, true));
        }
        self.writer_waker.set(Some(cx.waker().clone()));
        Poll::Pending
    }
}

/// Writes what the reader could not: responses that finished while a write or an earlier
/// waiting request held them up, and the rest of a write the socket did not take at once.
async fn write_loop(conn: Rc<Conn>, peer: Rc<str>) {
    let mut batch = BytesMut::new();
    loop {
        let (taken, taken_bytes, close) =
            std::future::poll_fn(|cx| conn.gather(cx, &mut batch)).await;
        {
            // An empty batch still flushes what TLS holds (`needs_flush`).
            conn.writing.set(true);
            let written = write_all(&conn, &batch).await;
            conn.writing.set(false);
            if let Err(e) = written {
                tracing::debug!(peer = %peer, error = %e, "write failed; closing");
                break;
            }
            if batch.capacity() > KEEP_OUT_BUFFER {
                batch = BytesMut::new();
            } else {
                batch.clear();
            }
        }
        conn.answered(taken, taken_bytes);
        conn.wake_reader();
        if close {
            break;
        }
    }
    conn.writer_done.set(true);
    conn.wake_reader();
    let _ = std::future::poll_fn(|cx| conn.stream.borrow_mut().poll_close(cx)).await;
}

async fn write_all(conn: &Conn, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = std::future::poll_fn(|cx| conn.stream.borrow_mut().poll_write(cx, buf)).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
    }
    std::future::poll_fn(|cx| conn.stream.borrow_mut().poll_flush(cx)).await
}

/// Bad-input warnings a shard logs per second; the rest are counted and reported with the next
/// one, so a flood of garbage connections cannot turn into a flood of log lines.
const WARNINGS_PER_SECOND: u32 = 10;

thread_local! {
    static WARN_WINDOW: std::cell::Cell<(u64, u32, u64)> = const { std::cell::Cell::new((0, 0, 0)) };
}

/// `Some(suppressed since the last logged line)` when this warning may be logged.
fn warn_budget() -> Option<u64> {
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    WARN_WINDOW.with(|w| {
        let (sec, logged, suppressed) = w.get();
        let (logged, suppressed) = if sec == second {
            (logged, suppressed)
        } else {
            (0, suppressed)
        };
        if logged < WARNINGS_PER_SECOND {
            w.set((second, logged + 1, 0));
            Some(suppressed)
        } else {
            w.set((second, logged, suppressed + 1));
            None
        }
    })
}

/// Largest buffer growth reserved ahead of the bytes of a frame: a client that announces a large
/// frame and sends it slowly gets memory as its bytes arrive, not all at once.
const MAX_RESERVE: usize = 1 << 20;

/// What the reader keeps about its connection between requests.
struct ReaderCtx {
    shard: Rc<Shard>,
    peer: Rc<str>,
    /// "/ip", as Kafka records a member's host.
    client_host: String,
    /// The caller of the last group request; rebuilt when a request names another client id.
    caller: Option<Rc<Caller>>,
    /// Who this connection is (anonymous until a listener authenticates it).
    principal: std::sync::Arc<security::Principal>,
    /// The listener the connection came in on (handlers answer with its advertised endpoint).
    listener: std::sync::Arc<crate::listeners::Listener>,
    /// SASL authentication state, on a SASL listener.
    sasl: Option<SaslConn>,
}

/// Where a SASL connection is in Kafka's `SaslServerAuthenticator` states.
enum SaslPhase {
    /// Expecting ApiVersions (once) or SaslHandshake (HANDSHAKE_OR_VERSIONS_REQUEST /
    /// HANDSHAKE_REQUEST, and REAUTH_PROCESS_HANDSHAKE when re-authenticating).
    Handshake { versions_seen: bool },
    /// Exchanging tokens; `kafka_headers` is false after a v0 SaslHandshake (raw tokens).
    Authenticate {
        server: Box<security::sasl::SaslServer>,
        mechanism: security::sasl::Mechanism,
        kafka_headers: bool,
    },
    /// A re-authentication asked for another mechanism: the next token fails
    /// (REAUTH_BAD_MECHANISM).
    BadMechanism(String),
    /// Authenticated: requests are served.
    Complete,
}

/// One connection's SASL state.
struct SaslConn {
    settings: std::sync::Arc<crate::listeners::SaslSettings>,
    phase: SaslPhase,
    /// The mechanism and principal of the last authentication, while re-authenticating.
    reauth: Option<(
        security::sasl::Mechanism,
        std::sync::Arc<security::Principal>,
    )>,
    /// The mechanism the connection authenticated with.
    mechanism: Option<security::sasl::Mechanism>,
    /// When the session ends (Kafka's `sessionExpirationTimeNanos`): past it, any request that
    /// does not begin a re-authentication closes the connection.
    expires_at: Option<Instant>,
    /// When the last re-authentication began: at most one a second (`KafkaChannel`).
    last_reauth: Option<Instant>,
}

impl SaslConn {
    fn authenticated(&self) -> bool {
        matches!(self.phase, SaslPhase::Complete)
    }
}

/// The caller of a request naming `client_id`: the previous request's, unless it named another.
fn caller_for<'a>(
    last: &'a mut Option<Rc<Caller>>,
    client_host: &str,
    client_id: Option<&str>,
    principal: &std::sync::Arc<security::Principal>,
    listener: &std::sync::Arc<crate::listeners::Listener>,
) -> &'a Rc<Caller> {
    let client_id = client_id.unwrap_or("");
    if last.as_ref().is_none_or(|c| {
        c.client_id != client_id || !std::sync::Arc::ptr_eq(&c.principal, principal)
    }) {
        *last = Some(Rc::new(Caller::new(
            client_id.to_string(),
            client_host.to_string(),
            principal.clone(),
            listener.clone(),
        )));
    }
    last.as_ref().expect("just set")
}

/// Authentication failures logged per client address: one line per address every 10 s (and
/// within the shard's warning budget), so a client retrying a bad password cannot fill the log.
fn auth_failure_budget(host: &str) -> Option<u64> {
    thread_local! {
        static LAST: RefCell<std::collections::HashMap<String, u64>> = RefCell::default();
    }
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let fresh = LAST.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= 4096 {
            m.retain(|_, t| second.saturating_sub(*t) < 10);
            if m.len() >= 4096 {
                m.clear(); // bounded: a flood from many addresses forgets the oldest
            }
        }
        match m.get(host) {
            Some(t) if second.saturating_sub(*t) < 10 => false,
            _ => {
                m.insert(host.to_string(), second);
                true
            }
        }
    });
    if fresh {
        warn_budget()
    } else {
        None
    }
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Serve one connection accepted on `listener` until the peer closes, a bad frame arrives, or it
/// has sent no complete request for `connections.max.idle.ms`. `_slot` holds its place under the
/// connection limits.
pub async fn serve(
    shard: Rc<Shard>,
    stream: TcpStream,
    _slot: crate::limits::Slot,
    listener: std::sync::Arc<crate::listeners::Listener>,
) {
    let addr = stream.peer_addr().ok();
    let peer: Rc<str> = addr.map_or_else(|| "?".into(), |a| a.to_string().into());
    let client_host = format!("/{}", addr.map(|a| a.ip().to_string()).unwrap_or_default());
    let _ = stream.set_nodelay(true);
    // Registered before the TLS handshake: a handshake that stalls is ended by the idle sweep
    // (which shuts the socket down under it) like any idle connection.
    let registration = shard.conns.register(&stream);
    let mut principal = std::sync::Arc::new(security::Principal::anonymous());
    let stream = match &listener.tls {
        None => Stream::Plain(stream),
        Some(tls) => {
            let acceptor = futures_rustls::TlsAcceptor::from(tls.clone());
            match acceptor.accept(stream).await {
                Ok(s) => {
                    // SSL listener: the client certificate's subject is the principal
                    // (DefaultKafkaPrincipalBuilder); on SASL_SSL, SASL decides.
                    if !listener.protocol.uses_sasl() {
                        let dn = s
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|c| c.first())
                            .and_then(|c| crate::tls::subject_rfc2253(c));
                        if let Some(dn) = dn {
                            principal = std::sync::Arc::new(security::Principal::user(dn));
                        }
                    }
                    Stream::Tls(Box::new(s))
                }
                Err(e) => {
                    if registration.closed_for_idle() {
                        tracing::debug!(peer = %peer, "closing connection: TLS handshake idle for connections.max.idle.ms");
                    } else if let Some(suppressed) = auth_failure_budget(&client_host) {
                        tracing::warn!(peer = %peer, listener = %listener.name, error = %e, suppressed, "closing connection: TLS handshake failed");
                    }
                    return;
                }
            }
        }
    };
    let conn = Rc::new(Conn {
        stream: RefCell::new(stream),
        out: RefCell::new(BytesMut::new()),
        out_requests: Cell::new(0),
        out_bytes: Cell::new(0),
        queue: RefCell::new(VecDeque::new()),
        unanswered: Cell::new(0),
        unanswered_bytes: Cell::new(0),
        writing: Cell::new(false),
        needs_flush: Cell::new(false),
        reader_done: Cell::new(false),
        writer_done: Cell::new(false),
        writer_waker: Cell::new(None),
        reader_waker: Cell::new(None),
    });
    let writer = glommio::spawn_local(write_loop(conn.clone(), peer.clone()));

    let frames = wire::FrameDecoder::new(shard.broker.config.socket_request_max_bytes);
    let sasl = listener.sasl.as_ref().map(|settings| SaslConn {
        settings: settings.clone(),
        phase: SaslPhase::Handshake {
            versions_seen: false,
        },
        reauth: None,
        mechanism: None,
        expires_at: None,
        last_reauth: None,
    });
    let mut ctx = ReaderCtx {
        shard,
        peer,
        client_host,
        caller: None,
        principal,
        listener,
        sasl,
    };
    let mut buf = BytesMut::with_capacity(4096);
    let mut scratch = vec![0u8; READ_CHUNK];
    'read: loop {
        loop {
            let frame = match frames.decode(&mut buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    if let Some(suppressed) = warn_budget() {
                        tracing::warn!(peer = %ctx.peer, error = %e, suppressed, "closing connection: bad frame");
                    }
                    conn.begin(0); // taken with the Close slot
                    conn.queue.borrow_mut().push_back(Slot::Close);
                    break 'read;
                }
            };
            // Room on the shard for one more waiting request.
            if ctx.shard.backlog.full() {
                let backlog = ctx.shard.backlog.clone();
                std::future::poll_fn(|cx| {
                    conn.flush_from_reader(cx);
                    backlog.room(cx)
                })
                .await;
            }
            // Room for one more request (the writer frees it as responses go out).
            let bytes = frame.len();
            if conn.full(bytes) {
                std::future::poll_fn(|cx| {
                    conn.flush_from_reader(cx);
                    if !conn.full(bytes) || conn.writer_done.get() {
                        Poll::Ready(())
                    } else {
                        conn.reader_waker.set(Some(cx.waker().clone()));
                        conn.wake_writer();
                        Poll::Pending
                    }
                })
                .await;
            }
            if conn.writer_done.get() {
                break 'read; // writer gone: the peer stopped reading
            }
            let now = Instant::now();
            registration.touch(now);
            conn.begin(bytes);
            if !start_request(&mut ctx, &conn, frame, now).await {
                // The Close slot stands for this request in the in-flight count.
                conn.queue.borrow_mut().push_back(Slot::Close);
                break 'read;
            }
        }
        std::future::poll_fn(|cx| {
            conn.flush_from_reader(cx);
            Poll::Ready(())
        })
        .await;
        // Before authentication a request may be at most sasl.server.max.receive.size (Kafka
        // fails the authentication on a larger one): an unauthenticated client cannot make the
        // broker buffer socket.request.max.bytes.
        if let Some(sasl) = ctx.sasl.as_ref().filter(|s| !s.authenticated()) {
            let limit = sasl.settings.max_receive_size.saturating_add(4);
            if frames.bytes_needed(&buf).is_ok_and(|n| n > limit) {
                if let Some(suppressed) = auth_failure_budget(&ctx.client_host) {
                    tracing::warn!(peer = %ctx.peer, suppressed, "closing connection: request larger than sasl.server.max.receive.size before authentication");
                }
                conn.begin(0);
                conn.queue.borrow_mut().push_back(Slot::Close);
                break 'read;
            }
        }
        // A client that always has more bytes ready would otherwise keep this task running:
        // let the other connections in when the shard's time slice is up.
        glommio::yield_if_needed().await;
        if let Ok(needed) = frames.bytes_needed(&buf) {
            buf.reserve(
                needed
                    .saturating_sub(buf.len())
                    .min(frames.max_frame_bytes() as usize)
                    .min(MAX_RESERVE),
            );
        }
        let read =
            std::future::poll_fn(|cx| conn.stream.borrow_mut().poll_read(cx, &mut scratch)).await;
        match read {
            Ok(0) => {
                if registration.closed_for_idle() {
                    tracing::debug!(peer = %ctx.peer, "closing connection: idle for connections.max.idle.ms");
                }
                break;
            }
            Ok(n) => buf.extend_from_slice(&scratch[..n]),
            Err(e) => {
                tracing::debug!(peer = %ctx.peer, error = %e, "read failed; closing");
                break;
            }
        }
    }
    conn.reader_done.set(true);
    conn.wake_writer();
    writer.await;
    drop(registration);
}

/// Decode one frame and start answering it: encoded into the output buffer if it finishes at
/// once, else as a task with a slot in the response order. `false` means: close the connection.
async fn start_request(
    ctx: &mut ReaderCtx,
    conn: &Conn,
    frame: bytes::Bytes,
    decoded_at: Instant,
) -> bool {
    let bytes = frame.len();
    if ctx.sasl.is_some() {
        match sasl_gate(ctx, conn, &frame, decoded_at) {
            Gate::Serve => {}
            Gate::Answered => return true,
            Gate::Close => return false,
        }
    }
    let versions = &ctx.shard.broker.versions;
    // ApiVersions of a version we do not know is answered, not closed (KIP-511): v0 body with
    // UNSUPPORTED_VERSION so the client can retry with a version we list.
    if let Ok((api_key, version, correlation_id)) = RequestHeader::peek_prefix(&frame) {
        if api_key == api_versions::API_VERSIONS_KEY
            && !versions.supports(api_key, version)
            && version >= 0
        {
            let out = api_versions::unsupported_version_frame(correlation_id, versions);
            conn.push_done(Some(out), bytes);
            return true;
        }
    }
    let (header, request) = match decode_request_ref(&frame, versions) {
        Ok(ok) => ok,
        Err((header, e)) => {
            let cid = header.map(|h| h.correlation_id);
            if let Some(suppressed) = warn_budget() {
                tracing::warn!(peer = %ctx.peer, correlation_id = ?cid, error = %e, suppressed, "closing connection: undecodable request");
            }
            return false;
        }
    };
    // Kafka sends nothing back for a Produce with acks=0 (the client does not read).
    let silent = matches!(&request, Request::Produce(r) if r.acks == 0);
    let api = Api {
        api_key: header.api_key,
        version: header.api_version,
        correlation_id: header.correlation_id,
        silent,
        decoded_at,
    };
    let caller = caller_for(
        &mut ctx.caller,
        &ctx.client_host,
        header.client_id,
        &ctx.principal,
        &ctx.listener,
    );
    let shard = &ctx.shard;
    let first = match (shard.handler)(shard, caller, header.api_version, request) {
        Handled::Done(result) => Ok(result),
        Handled::Waiting(mut fut) => {
            // Run it until it first has to wait (it may be done already).
            match std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
                Poll::Ready(result) => Ok(result),
                Poll::Pending => Err(fut),
            }
        }
    };
    match first {
        Ok(result) => {
            if conn.queue.borrow().is_empty() {
                // Nothing earlier is waiting: encode straight into the output buffer.
                let ok = api.finish(
                    shard,
                    &ctx.peer,
                    result,
                    decoded_at,
                    &mut conn.out.borrow_mut(),
                );
                if ok && api.silent {
                    conn.answered(1, bytes);
                } else if ok {
                    conn.add_out(bytes);
                }
                ok
            } else {
                let mut out = BytesMut::new();
                if !api.finish(shard, &ctx.peer, result, decoded_at, &mut out) {
                    return false;
                }
                conn.push_done((!api.silent).then_some(out), bytes);
                true
            }
        }
        Err(fut) => {
            // Held until the request ends (dropped with the task if the connection goes first).
            let slot =
                (!matches!(api.api_key, JOIN_GROUP | SYNC_GROUP)).then(|| shard.backlog.enter());
            let shard = shard.clone();
            let peer = ctx.peer.clone();
            let task = glommio::spawn_local(async move {
                let started = Instant::now();
                let result = fut.await;
                drop(slot);
                let mut out = BytesMut::new();
                if !api.finish(&shard, &peer, result, started, &mut out) {
                    Outcome::Close
                } else if api.silent {
                    Outcome::Nothing
                } else {
                    Outcome::Frame(out)
                }
            });
            conn.queue
                .borrow_mut()
                .push_back(Slot::Waiting(task, bytes));
            true
        }
    }
}

/// What the SASL layer does with a frame.
enum Gate {
    /// Not the authenticator's: serve it as usual.
    Serve,
    /// Answered by the authenticator.
    Answered,
    /// Close the connection (after whatever was answered before it, this frame's response
    /// included).
    Close,
}

/// A SASL listener's frame, as Kafka's `SaslServerAuthenticator` and `SocketServer` see it:
/// before authentication only ApiVersions (once), SaslHandshake and then the mechanism's tokens
/// are accepted and anything else closes the connection; once authenticated, a SaslHandshake on a
/// session that expires begins a re-authentication (at most once a second), and any other
/// request past the session's end closes the connection.
fn sasl_gate(ctx: &mut ReaderCtx, conn: &Conn, frame: &bytes::Bytes, now: Instant) -> Gate {
    let Some(mut sasl) = ctx.sasl.take() else {
        return Gate::Serve;
    };
    let gate = sasl_step(ctx, &mut sasl, conn, frame, now);
    ctx.sasl = Some(sasl);
    gate
}

fn sasl_step(
    ctx: &mut ReaderCtx,
    sasl: &mut SaslConn,
    conn: &Conn,
    frame: &bytes::Bytes,
    now: Instant,
) -> Gate {
    use security::sasl::SaslStep;
    let bytes = frame.len();
    // After a v0 SaslHandshake the tokens come raw, without Kafka headers.
    if let SaslPhase::Authenticate {
        kafka_headers: false,
        ..
    } = sasl.phase
    {
        return match authenticate(ctx, sasl, &frame[..], now) {
            Ok((SaslStep::Challenge(token), _)) | Ok((SaslStep::Success { token, .. }, _)) => {
                let mut out = BytesMut::with_capacity(4 + token.len());
                out.extend_from_slice(&(token.len() as u32).to_be_bytes());
                out.extend_from_slice(&token);
                conn.push_done(Some(out), bytes);
                Gate::Answered
            }
            Ok((SaslStep::Failure(_), _)) | Err(_) => {
                // No header to carry an error in: the close is the answer, held back as
                // Kafka holds it (KIP-306).
                let delay = sasl.settings.failed_auth_delay;
                if !delay.is_zero() {
                    conn.begin(0); // taken with the delay's slot
                    push_delayed(conn, delay, None, 0);
                }
                Gate::Close
            }
        };
    }
    if let SaslPhase::BadMechanism(msg) = &sasl.phase {
        log_auth_failure(ctx, msg);
        return Gate::Close;
    }
    let Ok((api_key, version, correlation_id)) = RequestHeader::peek_prefix(frame) else {
        return Gate::Close;
    };
    if let SaslPhase::Complete = sasl.phase {
        let can_reauth = sasl.expires_at.is_some()
            && sasl.last_reauth.is_none_or(|t| {
                now.saturating_duration_since(t) >= std::time::Duration::from_secs(1)
            });
        if api_key == SASL_HANDSHAKE && can_reauth {
            sasl.reauth = sasl.mechanism.map(|m| (m, ctx.principal.clone()));
            sasl.last_reauth = Some(now);
            sasl.phase = SaslPhase::Handshake {
                versions_seen: true,
            };
        } else if sasl.expires_at.is_some_and(|e| now >= e) {
            tracing::debug!(peer = %ctx.peer, "closing connection: SASL session expired (connections.max.reauth.ms)");
            return Gate::Close;
        } else {
            // KafkaApis answers a SaslHandshake / SaslAuthenticate here with ILLEGAL_SASL_STATE.
            return Gate::Serve;
        }
    }
    let versions = &ctx.shard.broker.versions;
    match &mut sasl.phase {
        SaslPhase::Handshake { versions_seen } => {
            if api_key == api_versions::API_VERSIONS_KEY && !*versions_seen {
                *versions_seen = true;
                return Gate::Serve;
            }
            if api_key != SASL_HANDSHAKE {
                if let Some(suppressed) = warn_budget() {
                    tracing::warn!(peer = %ctx.peer, api_key, suppressed, "closing connection: unexpected request during SASL handshake");
                }
                return Gate::Close;
            }
            let Ok((_, Request::SaslHandshake(req))) = decode_request_ref(frame, versions) else {
                return Gate::Close;
            };
            let enabled = &sasl.settings.mechanisms;
            let names: Vec<_> = enabled
                .iter()
                .map(|m| kafka_protocol::protocol::StrBytes::from_static_str(m.name()))
                .collect();
            let mechanism = security::sasl::Mechanism::from_name(req.mechanism.as_str())
                .filter(|m| enabled.contains(m));
            let mut resp =
                kafka_protocol::messages::SaslHandshakeResponse::default().with_mechanisms(names);
            let Some(mechanism) = mechanism else {
                resp.error_code = UNSUPPORTED_SASL_MECHANISM;
                respond(
                    conn,
                    correlation_id,
                    version,
                    Response::SaslHandshake(resp),
                    bytes,
                );
                log_auth_failure(
                    ctx,
                    &format!("Unsupported SASL mechanism {}", req.mechanism.as_str()),
                );
                conn.begin(0); // the Close slot that follows this answered request
                return Gate::Close;
            };
            if !respond(
                conn,
                correlation_id,
                version,
                Response::SaslHandshake(resp),
                bytes,
            ) {
                return Gate::Close;
            }
            sasl.phase = match &sasl.reauth {
                Some((previous, _)) if *previous != mechanism => SaslPhase::BadMechanism(format!(
                    "SASL mechanism '{}' requested by client is not supported for re-authentication of mechanism '{}'",
                    mechanism.name(),
                    previous.name()
                )),
                _ => {
                    let mut nonce = [0u8; 24];
                    if getrandom::getrandom(&mut nonce).is_err() {
                        tracing::error!(peer = %ctx.peer, "no randomness for a SASL nonce; closing");
                        conn.begin(0);
                        return Gate::Close;
                    }
                    SaslPhase::Authenticate {
                        server: Box::new(security::sasl::SaslServer::new(mechanism, nonce)),
                        mechanism,
                        kafka_headers: version >= 1,
                    }
                }
            };
            Gate::Answered
        }
        SaslPhase::Authenticate { .. } => {
            if api_key != SASL_AUTHENTICATE {
                // Kafka answers that request with its error response (ILLEGAL_SASL_STATE) and
                // closes; the close is what a client acts on.
                if let Some(suppressed) = warn_budget() {
                    tracing::warn!(peer = %ctx.peer, api_key, suppressed, "closing connection: unexpected request during SASL authentication");
                }
                return Gate::Close;
            }
            let Ok((_, Request::SaslAuthenticate(req))) = decode_request_ref(frame, versions)
            else {
                return Gate::Close;
            };
            // Kafka's ErrorMessage is null on success; the crate's default is "".
            let mut resp = kafka_protocol::messages::SaslAuthenticateResponse::default()
                .with_error_message(None);
            let close = match authenticate(ctx, sasl, &req.auth_bytes, now) {
                Ok((SaslStep::Challenge(token), _)) => {
                    resp.auth_bytes = token.into();
                    false
                }
                Ok((SaslStep::Success { token, .. }, lifetime_ms)) => {
                    resp.auth_bytes = token.into();
                    if version >= 1 {
                        resp.session_lifetime_ms = lifetime_ms;
                    }
                    false
                }
                Ok((SaslStep::Failure(f), _)) => {
                    resp.error_code = SASL_AUTHENTICATION_FAILED;
                    resp.error_message = Some(f.message.into());
                    true
                }
                Err(message) => {
                    resp.error_code = SASL_AUTHENTICATION_FAILED;
                    resp.error_message = Some(message.into());
                    true
                }
            };
            if close {
                // KIP-306: the failure's answer is held back connection.failed.authentication
                // .delay.ms, then written, then the connection closes (Kafka's
                // `Selector.maybeDelayCloseOnAuthenticationFailure` and
                // `SaslServerAuthenticator.handleAuthenticationFailure`).
                let mut out = BytesMut::new();
                if let Err(e) = encode_response(
                    correlation_id,
                    version,
                    &Response::SaslAuthenticate(resp),
                    &mut out,
                ) {
                    tracing::error!(error = %e, "could not encode a SASL response; closing");
                    return Gate::Close;
                }
                let delay = sasl.settings.failed_auth_delay;
                push_delayed(conn, delay, Some(out), bytes);
                // And the close as long again after it: written back to back, the answer and
                // the end of the stream reach the client in one read, and kafka-python drops
                // data that arrives with EOF (it then never sees the error). Kafka closes on a
                // later poll of its selector, which in practice leaves the same gap.
                if !delay.is_zero() {
                    conn.begin(0); // taken with the linger's slot
                    push_delayed(conn, delay * 2, None, 0);
                }
            } else if !respond(
                conn,
                correlation_id,
                version,
                Response::SaslAuthenticate(resp),
                bytes,
            ) {
                return Gate::Close;
            }
            if close {
                conn.begin(0); // the Close slot that follows this answered request
                return Gate::Close;
            }
            Gate::Answered
        }
        SaslPhase::BadMechanism(_) | SaslPhase::Complete => Gate::Close,
    }
}

/// One token through the mechanism. On success the connection is authenticated (the principal
/// goes into every later Caller) and the session lifetime is computed as Kafka's
/// `ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs`: the smaller of
/// `connections.max.reauth.ms` (when positive) and the credential's remaining lifetime. A
/// failure is logged (rate-limited per client address); `Err` is a failure the mechanism did
/// not word (a re-authentication that changed the principal).
fn authenticate(
    ctx: &mut ReaderCtx,
    sasl: &mut SaslConn,
    token: &[u8],
    now: Instant,
) -> Result<(security::sasl::SaslStep, i64), String> {
    use security::sasl::SaslStep;
    let SaslPhase::Authenticate {
        server, mechanism, ..
    } = &mut sasl.phase
    else {
        return Err("not authenticating".into());
    };
    let mechanism = *mechanism;
    let now_ms = wall_ms();
    let step = server.step(
        token,
        now_ms,
        &sasl.settings.config,
        &ctx.shard.broker.scram,
    );
    match step {
        SaslStep::Success {
            principal,
            token,
            credential_expires_ms,
        } => {
            if let Some((_, previous)) = &sasl.reauth {
                if **previous != principal {
                    let msg = format!(
                        "Cannot change principals during re-authentication from {}: {}",
                        previous, principal
                    );
                    log_auth_failure(ctx, &msg);
                    return Err(msg);
                }
            }
            let max = sasl.settings.reauth_ms;
            let lifetime = match (credential_expires_ms, max > 0) {
                (None, false) => None,
                (None, true) => Some(max),
                (Some(e), false) => Some((e - now_ms).max(0)),
                (Some(e), true) => Some((e - now_ms).min(max).max(0)),
            };
            sasl.expires_at = lifetime.map(|ms| now + std::time::Duration::from_millis(ms as u64));
            sasl.mechanism = Some(mechanism);
            sasl.reauth = None;
            sasl.phase = SaslPhase::Complete;
            if *ctx.principal != principal {
                ctx.principal = std::sync::Arc::new(principal.clone());
                ctx.caller = None;
            }
            Ok((
                SaslStep::Success {
                    principal,
                    token,
                    credential_expires_ms,
                },
                lifetime.unwrap_or(0),
            ))
        }
        SaslStep::Failure(mut f) => {
            if sasl.reauth.is_some() {
                f.message = f.reauthentication_message();
            }
            log_auth_failure(ctx, &f.message);
            Ok((SaslStep::Failure(f), 0))
        }
        other => Ok((other, 0)),
    }
}

fn log_auth_failure(ctx: &ReaderCtx, message: &str) {
    if let Some(suppressed) = auth_failure_budget(&ctx.client_host) {
        tracing::warn!(peer = %ctx.peer, listener = %ctx.listener.name, reason = %message, suppressed, "closing connection: SASL authentication failed");
    }
}

/// Encode `resp` and queue it behind everything before it. `false`: it could not be encoded.
/// Queue `frame` (the answer to a request of `bytes`; `None`: no answer) to be written `delay`
/// from now, behind everything before it. Nothing read after it is served: the caller closes.
fn push_delayed(conn: &Conn, delay: Duration, frame: Option<BytesMut>, bytes: usize) {
    if delay.is_zero() {
        conn.push_done(frame, bytes);
        return;
    }
    let task = glommio::spawn_local(async move {
        glommio::timer::sleep(delay).await;
        frame.map_or(Outcome::Nothing, Outcome::Frame)
    });
    conn.queue
        .borrow_mut()
        .push_back(Slot::Waiting(task, bytes));
}

fn respond(conn: &Conn, correlation_id: i32, version: i16, resp: Response, bytes: usize) -> bool {
    let mut out = BytesMut::new();
    if let Err(e) = encode_response(correlation_id, version, &resp, &mut out) {
        tracing::error!(error = %e, "could not encode a SASL response; closing");
        return false;
    }
    conn.push_done(Some(out), bytes);
    true
}

/// What encoding and measuring a response needs from its request.
#[derive(Clone, Copy)]
struct Api {
    api_key: i16,
    version: i16,
    correlation_id: i32,
    silent: bool,
    decoded_at: Instant,
}

impl Api {
    /// Encode the response into `out` (nothing for a silent request) and record its latency:
    /// queued from decode to `started`, handled until now. `false` means: close the connection.
    fn finish(
        &self,
        shard: &Shard,
        peer: &str,
        result: Result<Response, String>,
        started: Instant,
        out: &mut BytesMut,
    ) -> bool {
        let (api_key, version) = (self.api_key, self.version);
        let resp = match result {
            Ok(resp) => resp,
            Err(reason) => {
                tracing::warn!(%peer, api_key, version, %reason, "closing connection");
                return false;
            }
        };
        if self.silent {
            return true;
        }
        if let Err(e) = encode_response(self.correlation_id, version, &resp, out) {
            tracing::error!(%peer, api_key, version, error = %e, "could not encode response; closing");
            return false;
        }
        let done = Instant::now();
        let us = |d: std::time::Duration| d.as_micros() as u64;
        shard.table.metrics.borrow_mut().record_request(
            api_key,
            resp.error_code(),
            us(started - self.decoded_at),
            us(done - started),
            us(done - self.decoded_at),
        );
        true
    }
}
