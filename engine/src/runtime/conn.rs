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
use std::time::Instant;
use wire::{api_versions, decode_request_ref, encode_response, Request, RequestHeader, Response};

const JOIN_GROUP: i16 = kafka_protocol::messages::ApiKey::JoinGroup as i16;
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
    stream: RefCell<TcpStream>,
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
                if let Poll::Ready(Ok(n)) = Pin::new(&mut *stream).poll_write(cx, &out) {
                    out.advance(n);
                }
                if out.is_empty() {
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
        if taken > 0 || !batch.is_empty() {
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
        if !batch.is_empty() {
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
    let _ =
        std::future::poll_fn(|cx| Pin::new(&mut *conn.stream.borrow_mut()).poll_close(cx)).await;
}

async fn write_all(conn: &Conn, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n =
            std::future::poll_fn(|cx| Pin::new(&mut *conn.stream.borrow_mut()).poll_write(cx, buf))
                .await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
    }
    Ok(())
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
}

/// The caller of a request naming `client_id`: the previous request's, unless it named another.
fn caller_for<'a>(
    last: &'a mut Option<Rc<Caller>>,
    client_host: &str,
    client_id: Option<&str>,
    principal: &std::sync::Arc<security::Principal>,
) -> &'a Rc<Caller> {
    let client_id = client_id.unwrap_or("");
    if last.as_ref().is_none_or(|c| {
        c.client_id != client_id || !std::sync::Arc::ptr_eq(&c.principal, principal)
    }) {
        *last = Some(Rc::new(Caller::new(
            client_id.to_string(),
            client_host.to_string(),
            principal.clone(),
        )));
    }
    last.as_ref().expect("just set")
}

/// Serve one connection until the peer closes, a bad frame arrives, or it has sent no complete
/// request for `connections.max.idle.ms`. `_slot` holds its place under the connection limits.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream, _slot: crate::limits::Slot) {
    let addr = stream.peer_addr().ok();
    let peer: Rc<str> = addr.map_or_else(|| "?".into(), |a| a.to_string().into());
    let client_host = format!("/{}", addr.map(|a| a.ip().to_string()).unwrap_or_default());
    let _ = stream.set_nodelay(true);
    let registration = shard.conns.register(&stream);
    let conn = Rc::new(Conn {
        stream: RefCell::new(stream),
        out: RefCell::new(BytesMut::new()),
        out_requests: Cell::new(0),
        out_bytes: Cell::new(0),
        queue: RefCell::new(VecDeque::new()),
        unanswered: Cell::new(0),
        unanswered_bytes: Cell::new(0),
        writing: Cell::new(false),
        reader_done: Cell::new(false),
        writer_done: Cell::new(false),
        writer_waker: Cell::new(None),
        reader_waker: Cell::new(None),
    });
    let writer = glommio::spawn_local(write_loop(conn.clone(), peer.clone()));

    let frames = wire::FrameDecoder::new(shard.broker.config.socket_request_max_bytes);
    let mut ctx = ReaderCtx {
        shard,
        peer,
        client_host,
        caller: None,
        principal: std::sync::Arc::new(security::Principal::anonymous()),
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
        let read = std::future::poll_fn(|cx| {
            Pin::new(&mut *conn.stream.borrow_mut()).poll_read(cx, &mut scratch)
        })
        .await;
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
