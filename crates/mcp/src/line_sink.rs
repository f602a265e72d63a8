//! One output of newline-delimited messages, written by tasks on the runtime and by
//! plain threads that must never block: a stdio server's stdin (rmcp's messages and
//! the raw lane's calls) and the gateway's stdout (rmcp's messages and the raw relay's
//! replies).
//!
//! A task awaits its turn ([`LineSink::write_line`]). A thread writes at once
//! ([`LineSink::write_line_now`]) when no line of a thread waits and nobody else is
//! writing, and the stream takes the whole line without blocking (the common case: a
//! pipe or socket with room): then the runtime is not woken. Otherwise the line joins
//! a queue, which one task on the runtime writes out in order, holding the stream
//! until the queue is empty (a line begun on a thread is finished first).
//!
//! Invariants:
//! - two lines never interleave: every byte is written under the one stream lock;
//! - the lines of threads reach the stream in the order they were given (a request
//!   and its cancellation, say), whichever thread gave them;
//! - a thread never blocks here: it holds the queue's lock only around a
//!   non-blocking write;
//! - [`LineSink::deferred`] counts the queued lines, and [`LineSink::backed_up`] says
//!   when more than [`BACKED_UP_LINES`] (16) are, so a caller can stop adding lines that
//!   would only queue (a peer that does not read). A few lines queued are no sign of
//!   that: it is what two writers at once look like.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::runtime::Handle;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// More lines than this waiting for a task means the peer is not reading.
pub const BACKED_UP_LINES: usize = 16;

/// A stream that can be written without blocking, outside any task.
pub trait WriteNow: AsyncWrite + Unpin + Send + 'static {
    /// Writes what fits now: `WouldBlock` when nothing does (or when the stream cannot
    /// be written without the runtime; the queue's task then writes everything). What
    /// it wrote needs no flush.
    fn write_now(&mut self, buf: &[u8]) -> io::Result<usize>;
}

/// The lines of threads waiting for the queue's task.
#[derive(Debug, Default)]
struct Queue {
    lines: VecDeque<Vec<u8>>,
    /// Whether the task is running (then every new line queues behind).
    flushing: bool,
}

/// See the module doc. Must be made inside a tokio runtime.
#[derive(Debug)]
pub struct LineSink<W> {
    slot: Arc<AsyncMutex<Option<W>>>,
    queue: Arc<Mutex<Queue>>,
    queued: Arc<AtomicUsize>,
    handle: Handle,
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "closed")
}

impl<W: WriteNow> LineSink<W> {
    /// A sink writing to `w`, its task on the current runtime.
    pub fn new(w: W) -> Self {
        Self {
            slot: Arc::new(AsyncMutex::new(Some(w))),
            queue: Arc::default(),
            queued: Arc::default(),
            handle: Handle::current(),
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
    /// else through the queue (see the module doc). An error is the stream's, when it
    /// was written here; the task's failure is only logged (the peer is gone).
    pub fn write_line_now(&self, line: Vec<u8>) -> io::Result<()> {
        let Ok(mut queue) = self.queue.lock() else {
            return Err(io::Error::other("the line queue is poisoned"));
        };
        if queue.flushing {
            self.enqueue(&mut queue, line);
            return Ok(());
        }
        let Ok(mut slot) = self.slot.clone().try_lock_owned() else {
            // A task is writing: this line waits for it.
            self.enqueue(&mut queue, line);
            queue.flushing = true;
            self.handle.spawn(flush(
                self.slot.clone(),
                self.queue.clone(),
                self.queued.clone(),
                None,
            ));
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
            // The rest first, by the task, which keeps the stream until it is written.
            self.enqueue(&mut queue, line[done..].to_vec());
            queue.flushing = true;
            self.handle.spawn(flush(
                self.slot.clone(),
                self.queue.clone(),
                self.queued.clone(),
                Some(slot),
            ));
        }
        Ok(())
    }

    fn enqueue(&self, queue: &mut Queue, line: Vec<u8>) {
        queue.lines.push_back(line);
        self.queued.fetch_add(1, Ordering::AcqRel);
    }

    /// How many lines of threads wait for the queue's task.
    pub fn deferred(&self) -> usize {
        self.queued.load(Ordering::Acquire)
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

/// The queue's task: writes the queued lines in order, holding the stream (`held`,
/// when a line was begun on a thread) until the queue is empty.
async fn flush<W: WriteNow>(
    slot: Arc<AsyncMutex<Option<W>>>,
    queue: Arc<Mutex<Queue>>,
    queued: Arc<AtomicUsize>,
    held: Option<OwnedMutexGuard<Option<W>>>,
) {
    let mut slot = match held {
        Some(guard) => guard,
        None => slot.lock_owned().await,
    };
    loop {
        let line = {
            let Ok(mut q) = queue.lock() else {
                return;
            };
            match q.lines.pop_front() {
                Some(line) => line,
                None => {
                    q.flushing = false;
                    return;
                }
            }
        };
        queued.fetch_sub(1, Ordering::AcqRel);
        let written = match slot.as_mut() {
            Some(w) => match w.write_all(&line).await {
                Ok(()) => w.flush().await,
                Err(e) => Err(e),
            },
            None => Err(closed()),
        };
        if let Err(e) = written {
            tracing::debug!("a queued line was not written: {e}");
        }
    }
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

    /// Lines one thread gives while a task holds the stream, then while the queue
    /// drains, arrive in the order given.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_lines_of_a_thread_keep_their_order() {
        let (sink, mut theirs) = pair();
        let sink = Arc::new(sink);
        // A task holds the stream with a line larger than the socket's buffer.
        let big = {
            let sink = sink.clone();
            tokio::spawn(async move {
                let mut l = vec![b'x'; 1 << 20];
                l.push(b'\n');
                sink.write_line(&l).await.unwrap();
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let writer = {
            let sink = sink.clone();
            std::thread::spawn(move || {
                for i in 0..5000 {
                    sink.write_line_now(format!("{i}\n").into_bytes()).unwrap();
                    if i == 100 {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                }
            })
        };
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut buf = [0u8; 65536];
            while !all.ends_with(b"4999\n") {
                let n = theirs.read(&mut buf).unwrap();
                assert!(n > 0);
                all.extend_from_slice(&buf[..n]);
            }
            all
        });
        writer.join().unwrap();
        big.await.unwrap();
        let all = tokio::task::spawn_blocking(move || reader.join().unwrap())
            .await
            .unwrap();
        let numbers: Vec<usize> = all
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty() && l[0] != b'x')
            .map(|l| std::str::from_utf8(l).unwrap().parse().unwrap())
            .collect();
        assert_eq!(numbers, (0..5000).collect::<Vec<_>>());
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
