//! A pipe or socket this process inherited (its stdin, its stdout) read
//! and written through tokio's reactor, as a socket is.
//!
//! `tokio::io::stdin()` and `stdout()` hand every read and write to a
//! thread of the blocking pool, since stdio may be a terminal or a file,
//! which the reactor cannot wait on: two thread switches each way for each
//! batch of frames. When the descriptor is a pipe or a socket (a server
//! spawned by its client, the usual MCP setup), it is put in non-blocking
//! mode and waited on like any socket instead; its mode is put back when
//! it is dropped, since the mode belongs to the open pipe, which other
//! processes may share.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// An inherited pipe or socket, non-blocking while this lives.
#[derive(Debug)]
pub(crate) struct Inherited {
    fd: AsyncFd<File>,
    /// Whether the descriptor was blocking before (and is made so again).
    was_blocking: bool,
}

impl Inherited {
    /// `fd` (duplicated) driven by the reactor, waited on for `interest`;
    /// `None` when it is not a pipe or socket, when it is shared with one
    /// of `others` (see [`alone`](Self::alone)), when there is no reactor,
    /// or when the system refuses (the caller then uses tokio's stdio).
    pub(crate) fn adopt(fd: BorrowedFd<'_>, others: &[BorrowedFd<'_>], interest: Interest) -> Option<Self> {
        tokio::runtime::Handle::try_current().ok()?;
        if !Self::alone(fd, others) {
            return None;
        }
        let file = File::from(fd.try_clone_to_owned().ok()?);
        let kind = file.metadata().ok()?.file_type();
        if !(kind.is_fifo() || kind.is_socket()) {
            return None;
        }
        // Registered while still blocking, so that nothing is to be put
        // back when the reactor refuses it. A runtime built without IO has
        // no reactor and tokio panics then, rather than saying so: that
        // runtime gets tokio's stdio, as before.
        // `register_with_interest` replaces `try_with_interest` in tokio
        // 1.54, whose worry (a descriptor closed under the reactor) a
        // `File`, which owns its descriptor, does not have; this one is in
        // every tokio since 1.39.
        #[allow(deprecated)]
        let registered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            AsyncFd::try_with_interest(file, interest)
        }));
        let fd = registered.ok()?.ok()?;
        let was_blocking = !nonblocking(fd.get_ref().as_fd()).ok()?;
        if was_blocking {
            set_nonblocking(fd.get_ref().as_fd(), true).ok()?;
        }
        Some(Inherited { fd, was_blocking })
    }

    /// Whether `fd` is a pipe, socket or file of its own: not the same as
    /// any of `others` (stdin and stdout one socket, stdout and stderr one
    /// pipe after `2>&1`). Made non-blocking, the one would be so for the
    /// others too, whose users (tokio's stdio, `eprintln!`) would then meet
    /// a full pipe they cannot wait on; and the mode put back by one would
    /// leave the other blocking under the reactor.
    fn alone(fd: BorrowedFd<'_>, others: &[BorrowedFd<'_>]) -> bool {
        let id = |fd: BorrowedFd<'_>| {
            let file = File::from(fd.try_clone_to_owned().ok()?);
            let meta = file.metadata().ok()?;
            Some((meta.dev(), meta.ino()))
        };
        // Unknown: assume the worst.
        let Some(own) = id(fd) else { return false };
        others
            .iter()
            .all(|other| id(*other).is_some_and(|other| other != own))
    }
}

impl Drop for Inherited {
    fn drop(&mut self) {
        if self.was_blocking {
            let _ = set_nonblocking(self.fd.get_ref().as_fd(), false);
        }
    }
}

/// Whether `fd`'s open file is in non-blocking mode.
fn nonblocking(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: F_GETFL takes no pointer; `fd` is open while borrowed.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags & libc::O_NONBLOCK != 0)
}

fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL and F_SETFL take no pointer; `fd` is open while
    // borrowed.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl AsyncRead for Inherited {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.fd.poll_read_ready(cx))?;
            // Read into the buffer as it is, not zeroed first (a frame
            // reader's spare room is 8 KiB or more).
            // SAFETY: nothing uninitialized is read from `unfilled`; only
            // the `n` bytes read(2) wrote are marked initialized.
            let unfilled = unsafe { buf.unfilled_mut() };
            match ready.try_io(|file| {
                // SAFETY: read(2) writes at most `unfilled.len()` bytes into
                // it; the descriptor is open while `file` lives.
                let n = unsafe { libc::read(file.as_raw_fd(), unfilled.as_mut_ptr().cast(), unfilled.len()) };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            }) {
                Ok(Ok(n)) => {
                    // SAFETY: read(2) initialized these `n` bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Inherited {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.fd.poll_write_ready(cx))?;
            match ready.try_io(|file| file.get_ref().write(bytes)) {
                Ok(done) => return Poll::Ready(done),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is kept back: every write went to the descriptor.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The descriptor is shared with the process's own stdout: it
        // closes when the process ends.
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both were just opened and are owned by nobody else.
        unsafe {
            use std::os::fd::FromRawFd;
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        }
    }

    #[tokio::test]
    async fn a_pipe_is_read_and_written_through_the_reactor_and_left_as_found() {
        let (read, write) = pipe();
        let mut reader = Inherited::adopt(read.as_fd(), &[], Interest::READABLE).expect("a pipe is adopted");
        let mut writer = Inherited::adopt(write.as_fd(), &[], Interest::WRITABLE).expect("a pipe is adopted");
        assert!(nonblocking(read.as_fd()).unwrap());
        // More than a pipe holds (64 KiB): the writer waits for the reader.
        let sent: Vec<u8> = (0..300_000u32).map(|n| n as u8).collect();
        let expected = sent.clone();
        let writing = tokio::spawn(async move {
            writer.write_all(&sent).await.unwrap();
            writer.flush().await.unwrap();
        });
        let mut got = vec![0; expected.len()];
        reader.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
        writing.await.unwrap();
        drop(reader);
        assert!(!nonblocking(read.as_fd()).unwrap(), "blocking again once dropped");
        assert!(!nonblocking(write.as_fd()).unwrap());
    }

    #[tokio::test]
    async fn the_end_of_a_pipe_is_read_as_its_end() {
        let (read, write) = pipe();
        let mut reader = Inherited::adopt(read.as_fd(), &[], Interest::READABLE).unwrap();
        let mut write = File::from(write);
        write.write_all(b"last\n").unwrap();
        drop(write);
        let mut got = String::new();
        reader.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "last\n");
    }

    #[tokio::test]
    async fn a_file_is_left_to_tokios_threads() {
        let file = File::open(std::env::current_exe().unwrap()).unwrap();
        assert!(Inherited::adopt(file.as_fd(), &[], Interest::READABLE).is_none());
    }

    #[test]
    fn without_a_runtime_nothing_is_adopted() {
        let (read, _write) = pipe();
        assert!(Inherited::adopt(read.as_fd(), &[], Interest::READABLE).is_none());
        assert!(!nonblocking(read.as_fd()).unwrap(), "left as found");
    }

    #[test]
    fn a_pipe_shared_with_another_descriptor_is_not_alone() {
        let (read, write) = pipe();
        let (other, _keep) = pipe();
        assert!(
            !Inherited::alone(read.as_fd(), &[write.as_fd()]),
            "two ends of one pipe"
        );
        assert!(!Inherited::alone(read.as_fd(), &[other.as_fd(), read.as_fd()]));
        assert!(Inherited::alone(read.as_fd(), &[other.as_fd()]));
        assert!(Inherited::alone(read.as_fd(), &[]));
    }

    #[test]
    fn a_runtime_without_io_gets_tokios_stdio() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (read, _write) = pipe();
        let _inside = runtime.enter();
        assert!(Inherited::adopt(read.as_fd(), &[], Interest::READABLE).is_none());
        assert!(!nonblocking(read.as_fd()).unwrap(), "left as found");
    }
}
