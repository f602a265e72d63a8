//! One output of newline-delimited messages, written by tasks on the runtime and by
//! plain threads that must never block: a stdio server's stdin (rmcp's messages and
//! the raw lane's calls) and the gateway's stdout (rmcp's messages and the raw relay's
//! replies).
//!
//! A task awaits its turn ([`LineSink::write_line`]). A thread writes at once what fits
//! ([`LineSink::write_line_now`]): when nobody else is writing and the stream takes the
//! whole line without blocking (the common case: a pipe or socket with room), the line
//! is written on that thread and the runtime is not woken; otherwise the rest goes to a
//! task on the runtime, which keeps the stream until the line is whole.
//!
//! Invariants:
//! - two lines never interleave: every byte is written under the one lock, and a line
//!   begun on a thread is finished, still under that lock, by its task;
//! - a thread never blocks here and never holds the lock after it returns, except
//!   through the task it hands the rest to;
//! - [`LineSink::deferred`] counts the lines waiting for a task, and
//!   [`LineSink::backed_up`] says when more than [`BACKED_UP_LINES`] do, so a caller can
//!   stop adding lines that would only queue (a peer that does not read). One line
//!   waiting is no sign of that: it is what two writers at once look like.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::runtime::Handle;
use tokio::sync::Mutex as AsyncMutex;

/// More lines than this waiting for a task means the peer is not reading.
pub const BACKED_UP_LINES: usize = 16;

/// A stream that can be written without blocking, outside any task.
pub trait WriteNow: AsyncWrite + Unpin + Send + 'static {
    /// Writes what fits now: `WouldBlock` when nothing does (or when the stream cannot
    /// be written without the runtime; its task then writes everything). What it wrote
    /// needs no flush.
    fn write_now(&mut self, buf: &[u8]) -> io::Result<usize>;
}

/// See the module doc. Must be made inside a tokio runtime.
#[derive(Debug)]
pub struct LineSink<W> {
    slot: Arc<AsyncMutex<Option<W>>>,
    handle: Handle,
    deferred: Arc<AtomicUsize>,
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "closed")
}

/// Counts a line handed to a task until that task ends.
struct Deferred(Arc<AtomicUsize>);

impl Deferred {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count.clone())
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<W: WriteNow> LineSink<W> {
    /// A sink writing to `w`, its tasks on the current runtime.
    pub fn new(w: W) -> Self {
        Self {
            slot: Arc::new(AsyncMutex::new(Some(w))),
            handle: Handle::current(),
            deferred: Arc::default(),
        }
    }

    /// Writes one whole line (ending in `\n`) and flushes it, after the lines before it.
    /// A closed sink is `NotConnected`.
    pub async fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let mut slot = self.slot.lock().await;
        let w = slot.as_mut().ok_or_else(closed)?;
        w.write_all(line).await?;
        w.flush().await
    }

    /// Writes one whole line from any thread without blocking: at once when it can,
    /// else by a task (see the module doc). An error is the stream's, when it was
    /// written here; a task's failure is only logged (the peer is gone).
    pub fn write_line_now(&self, line: Vec<u8>) -> io::Result<()> {
        let Ok(mut slot) = self.slot.clone().try_lock_owned() else {
            // Someone is writing: this line waits for its turn.
            let slot = self.slot.clone();
            let deferred = Deferred::new(&self.deferred);
            self.handle.spawn(async move {
                let _deferred = deferred;
                let mut slot = slot.lock().await;
                if let Some(w) = slot.as_mut()
                    && let Err(e) = finish(w, &line).await
                {
                    tracing::debug!("a deferred line was not written: {e}");
                }
            });
            return Ok(());
        };
        let w = slot.as_mut().ok_or_else(closed)?;
        let mut done = 0;
        while done < line.len() {
            match w.write_now(&line[done..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if done < line.len() {
            // The rest, still under the lock, by a task that can wait for room.
            let deferred = Deferred::new(&self.deferred);
            self.handle.spawn(async move {
                let _deferred = deferred;
                if let Some(w) = slot.as_mut()
                    && let Err(e) = finish(w, &line[done..]).await
                {
                    tracing::debug!("the rest of a line was not written: {e}");
                }
            });
        }
        Ok(())
    }

    /// How many lines wait for a task.
    pub fn deferred(&self) -> usize {
        self.deferred.load(Ordering::Acquire)
    }

    /// Whether more than [`BACKED_UP_LINES`] lines wait (see the module doc).
    pub fn backed_up(&self) -> bool {
        self.deferred() > BACKED_UP_LINES
    }

    /// Closes the stream (after the line being written, if any).
    pub async fn close(&self) {
        self.slot.lock().await.take();
    }
}

async fn finish<W: WriteNow>(w: &mut W, rest: &[u8]) -> io::Result<()> {
    w.write_all(rest).await?;
    w.flush().await
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    use super::*;

    /// A socket written with `MSG_DONTWAIT`.
    struct Sock(tokio::net::UnixStream);

    impl AsyncWrite for Sock {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
        }
        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_flush(cx)
        }
        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
        }
    }

    impl WriteNow for Sock {
        fn write_now(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.try_write(buf)
        }
    }

    fn pair() -> (LineSink<Sock>, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let sink = LineSink::new(Sock(tokio::net::UnixStream::from_std(ours).unwrap()));
        (sink, theirs)
    }

    /// Lines from threads and tasks, some larger than the socket's buffer, arrive
    /// whole and never interleaved, while the reader is slow.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_from_threads_and_tasks_never_interleave() {
        let (sink, mut theirs) = pair();
        let sink = Arc::new(sink);
        let line = |who: u8, n: usize| {
            let mut l = vec![b'a' + who; n];
            l.push(b'\n');
            l
        };
        let mut threads = Vec::new();
        for who in 0..3u8 {
            let sink = sink.clone();
            threads.push(std::thread::spawn(move || {
                for i in 0..20 {
                    let n = if i % 5 == 0 { 300_000 } else { 100 };
                    sink.write_line_now(line(who, n)).unwrap();
                }
            }));
        }
        let task = {
            let sink = sink.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    let n = if i % 7 == 0 { 250_000 } else { 50 };
                    sink.write_line(&line(3, n)).await.unwrap();
                }
            })
        };
        let reader = std::thread::spawn(move || {
            let (mut all, mut lines) = (Vec::new(), 0);
            let mut buf = [0u8; 4096];
            while lines < 80 {
                std::thread::sleep(std::time::Duration::from_micros(50));
                let n = theirs.read(&mut buf).unwrap();
                assert!(n > 0);
                lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
                all.extend_from_slice(&buf[..n]);
            }
            all
        });
        for t in threads {
            t.join().unwrap();
        }
        task.await.unwrap();
        let all = tokio::task::spawn_blocking(move || reader.join().unwrap())
            .await
            .unwrap();
        let lines: Vec<&[u8]> = all
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 80);
        for l in lines {
            assert!(l.iter().all(|&b| b == l[0]), "a line was interleaved");
        }
        // Every task is done with the stream.
        for _ in 0..100 {
            if sink.deferred() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(sink.deferred(), 0);
    }

    #[tokio::test]
    async fn a_closed_sink_says_so() {
        let (sink, _theirs) = pair();
        sink.close().await;
        assert_eq!(
            sink.write_line_now(b"x\n".to_vec()).unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
        assert_eq!(
            sink.write_line(b"x\n").await.unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
    }
}
