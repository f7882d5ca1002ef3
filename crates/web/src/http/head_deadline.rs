//! The header timeout of an HTTP connection, apart from its keep-alive idle time
//! (docs/operations.md, "Limits": headers within `http_header_timeout_s`, idle keep-alive
//! connections closed after 60 s).
//!
//! hyper has one timer for both: it starts whenever the connection waits for a request, so a
//! 10 s header timeout would also close every keep-alive connection after 10 s of silence, and
//! clients that reuse pooled connections (most, for a minute or more) would then race the close
//! and fail a request now and then. So hyper's timer is set to the idle time, and this wrapper
//! of the socket adds the header deadline: it starts when a fresh connection opens and when
//! the first byte of a request arrives after an answer, and ends when hyper hands the request
//! to the service. Past it, reads fail and hyper closes the connection.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Whether the connection is inside a request (its head read, its answer not yet sent whole);
/// shared by the socket wrapper and the service.
#[derive(Debug, Default)]
pub struct InRequest(AtomicBool);

impl InRequest {
    /// The service received a request: no header deadline until its answer is sent.
    pub fn start(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// The answer was sent (or dropped): the next bytes start a new request head.
    pub fn end(&self) {
        self.0.store(false, Ordering::Release);
    }

    fn active(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A socket whose request heads must arrive within `timeout`.
pub struct HeadDeadline<S> {
    inner: S,
    in_request: Arc<InRequest>,
    timeout: Duration,
    /// Whether the deadline runs; the timer is reused from one request to the next.
    armed: bool,
    deadline: Pin<Box<Sleep>>,
}

impl<S> HeadDeadline<S> {
    /// A fresh connection, opened at `opened`: its first head must be complete within
    /// `timeout` from then.
    pub fn new(inner: S, timeout: Duration, opened: Instant, in_request: Arc<InRequest>) -> HeadDeadline<S> {
        HeadDeadline {
            inner,
            in_request,
            timeout,
            armed: true,
            deadline: Box::pin(tokio::time::sleep_until(opened + timeout)),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HeadDeadline<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.in_request.active() {
            this.armed = false;
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        if this.armed && this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "request headers too slow")));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if !this.armed && matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            // The first byte of the next request: its head has `timeout` from now.
            this.armed = true;
            let at = Instant::now() + this.timeout;
            this.deadline.as_mut().reset(at);
            // Registers the timer with this task, so that it wakes the read at the deadline.
            let _ = this.deadline.as_mut().poll(cx);
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeadDeadline<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A response body that tells the connection when it has been sent whole (or dropped).
pub struct EndsRequest<B> {
    inner: B,
    in_request: Arc<InRequest>,
}

impl<B> EndsRequest<B> {
    pub fn new(inner: B, in_request: Arc<InRequest>) -> EndsRequest<B> {
        EndsRequest { inner, in_request }
    }
}

impl<B> Drop for EndsRequest<B> {
    fn drop(&mut self) {
        self.in_request.end();
    }
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for EndsRequest<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}
