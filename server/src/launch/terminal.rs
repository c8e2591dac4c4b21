//! An interactive step's terminal (`salloc`, `srun --pty` outside a job): the
//! supervisor opens a pseudo-terminal, gives its other end to the job as standard
//! input, output and error (the trampoline makes it the job's controlling terminal),
//! and relays it to the one connection the portal opens to [`SOCKET`] in the step's
//! folder (root's, 0600) when the job's owner attaches. The job's command starts once
//! its owner has attached ([`await_attachment`]), so that nothing it prints is lost;
//! nobody within [`FIRST_ATTACH`] fails the job. What the job writes goes to that
//! connection as it comes; what comes from it is framed ([`Frame`]): bytes typed, and
//! the window's size. When the connection ends, the supervisor hangs the terminal up
//! (SIGHUP to the job), as closing a terminal window does.
//!
//! The terminal is the job's own, not the portal's nor anyone else's: a job that
//! pushes input into it (TIOCSTI) reaches only itself.
//! The portal's side is [`Attachment`]: the job owner's websocket
//! (`http::api::jobs::attach`) writes through it what is typed and the window's size.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The socket the portal connects to, in the step's folder.
pub const SOCKET: &str = "attach.sock";
/// How long a started interactive job waits for its owner to attach.
pub const FIRST_ATTACH: Duration = Duration::from_secs(120);
/// The byte the job's side sends the one connection it takes, before anything else: a
/// connection the kernel queued but the job's side never took is closed without it.
const TAKEN: u8 = 0x06;
/// How long the portal waits for [`TAKEN`].
const TAKEN_WITHIN: Duration = Duration::from_secs(10);

/// The most one frame carries.
pub const MAX_FRAME: usize = u16::MAX as usize;

/// A frame from the attached client: a kind byte, a 16-bit big-endian length, then
/// that many bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Bytes typed (kind 0).
    Input(Vec<u8>),
    /// The window's size in rows and columns (kind 1, four bytes).
    Resize { rows: u16, cols: u16 },
}

impl Frame {
    pub const INPUT: u8 = 0;
    pub const RESIZE: u8 = 1;

    /// The frame's bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let resize;
        let (kind, payload): (u8, &[u8]) = match self {
            Frame::Input(bytes) => (Frame::INPUT, bytes),
            Frame::Resize { rows, cols } => {
                let [r0, r1] = rows.to_be_bytes();
                let [c0, c1] = cols.to_be_bytes();
                resize = [r0, r1, c0, c1];
                (Frame::RESIZE, &resize)
            }
        };
        let mut out = Vec::with_capacity(3 + payload.len());
        out.push(kind);
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// The frames complete at the start of `buffer`, taken out of it; what is left is
    /// the start of the next. `Err`: a frame of an unknown kind or a bad resize.
    pub fn take_all(buffer: &mut Vec<u8>) -> Result<Vec<Frame>, String> {
        let mut frames = Vec::new();
        let mut at = 0;
        while buffer.len() - at >= 3 {
            let kind = buffer[at];
            let len = u16::from_be_bytes([buffer[at + 1], buffer[at + 2]]) as usize;
            if buffer.len() - at - 3 < len {
                break;
            }
            let payload = &buffer[at + 3..at + 3 + len];
            frames.push(match (kind, len) {
                (Frame::INPUT, _) => Frame::Input(payload.to_vec()),
                (Frame::RESIZE, 4) => Frame::Resize {
                    rows: u16::from_be_bytes([payload[0], payload[1]]),
                    cols: u16::from_be_bytes([payload[2], payload[3]]),
                },
                _ => return Err(format!("a frame of kind {kind} and {len} bytes")),
            });
            at += 3 + len;
        }
        buffer.drain(..at);
        Ok(frames)
    }
}

/// The two ends of a job's terminal.
pub struct Pty {
    /// The supervisor's end.
    pub master: OwnedFd,
    /// The job's end, its user's.
    pub slave: OwnedFd,
}

/// A new terminal whose job end belongs to `uid`:`gid` (as a login gives a user the
/// terminal it opens for them).
pub fn open(uid: u32, gid: u32) -> std::io::Result<Pty> {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::OpenptFlags;
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fchown(
        &slave,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    )?;
    Ok(Pty { master, slave })
}

/// No echo, no line editing, no carriage return added: the bytes pass as they are
/// (a command's output to a file or a pipe at the other end).
pub fn make_raw(master: &OwnedFd) -> std::io::Result<()> {
    let mut mode = rustix::termios::tcgetattr(master)?;
    mode.make_raw();
    rustix::termios::tcsetattr(master, rustix::termios::OptionalActions::Now, &mode)?;
    Ok(())
}

/// Wait at `socket` (made here, root's, 0600) for the portal's one connection: the
/// job's owner attaching. Later connections are refused (the socket is removed).
pub async fn await_attachment(socket: &Path) -> std::io::Result<tokio::net::UnixStream> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(socket);
    let listener = tokio::net::UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    let accepted = tokio::time::timeout(FIRST_ATTACH, listener.accept()).await;
    // Connections queued behind the first are closed here, without [`TAKEN`].
    drop(listener);
    let _ = std::fs::remove_file(socket);
    match accepted {
        Ok(connection) => {
            let mut connection = connection?.0;
            connection.write_all(&[TAKEN]).await?;
            Ok(connection)
        }
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "nobody attached to the job's terminal within {} s",
                FIRST_ATTACH.as_secs()
            ),
        )),
    }
}

/// Relay the terminal's `master` end and the attached `connection` until either
/// ends. When the connection ends first, the terminal is hung up: SIGHUP to the job's
/// session (`session`, the process group of the step's first process) and to the
/// terminal's foreground group, as closing a terminal does. What the job printed
/// before it closed the terminal is relayed whole.
pub async fn serve(master: OwnedFd, connection: tokio::net::UnixStream, session: i32) {
    match serve_inner(&master, connection).await {
        Ok(Ended::Job) => {}
        Ok(Ended::Client) => hang_up(&master, session),
        Err(e) => {
            eprintln!("the terminal's relay ended: {e}");
            hang_up(&master, session);
        }
    }
}

/// Which side ended the relay.
enum Ended {
    /// Every process of the job closed the terminal.
    Job,
    /// The attached client went, or none came.
    Client,
}

fn hang_up(master: &OwnedFd, session: i32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    if let Ok(foreground) = rustix::termios::tcgetpgrp(master) {
        let _ = killpg(
            Pid::from_raw(foreground.as_raw_nonzero().get()),
            Signal::SIGHUP,
        );
    }
    let _ = killpg(Pid::from_raw(session), Signal::SIGHUP);
}

async fn serve_inner(
    master: &OwnedFd,
    connection: tokio::net::UnixStream,
) -> std::io::Result<Ended> {
    // The terminal's reads and writes block (each on a thread of the runtime's pool);
    // its size is set on its own descriptor.
    let mut from_job = tokio::fs::File::from_std(std::fs::File::from(master.try_clone()?));
    let mut to_job = tokio::fs::File::from_std(std::fs::File::from(master.try_clone()?));
    let (mut from_client, mut to_client) = connection.into_split();
    let mut out = vec![0u8; 64 << 10];
    let mut incoming: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        tokio::select! {
            read = from_job.read(&mut out) => match read {
                // EIO: every process of the job has closed its end.
                Ok(0) | Err(_) => return Ok(Ended::Job),
                Ok(n) => {
                    if to_client.write_all(&out[..n]).await.is_err() {
                        return Ok(Ended::Client);
                    }
                }
            },
            read = from_client.read(&mut chunk) => {
                let n = read.unwrap_or(0);
                if n == 0 {
                    return Ok(Ended::Client);
                }
                incoming.extend_from_slice(&chunk[..n]);
                let frames = Frame::take_all(&mut incoming).map_err(std::io::Error::other)?;
                for frame in frames {
                    match frame {
                        Frame::Input(bytes) => {
                            to_job.write_all(&bytes).await?;
                            to_job.flush().await?;
                        }
                        Frame::Resize { rows, cols } => {
                            let size = rustix::termios::Winsize {
                                ws_row: rows,
                                ws_col: cols,
                                ws_xpixel: 0,
                                ws_ypixel: 0,
                            };
                            rustix::termios::tcsetwinsize(master, size)?;
                        }
                    }
                }
            }
        }
    }
}

/// The portal's connection to a job's terminal: the job's output to read, and what is
/// typed to send ([`Keys`]).
pub struct Attachment {
    stream: tokio::net::UnixStream,
}

impl Attachment {
    /// Attach to the terminal whose socket is `socket`: once the job's side has taken
    /// this connection (one per job; a second, even one the kernel had queued, is
    /// refused).
    pub async fn connect(socket: &Path) -> std::io::Result<Attachment> {
        let mut stream = tokio::net::UnixStream::connect(socket).await?;
        let mut taken = [0u8; 1];
        match tokio::time::timeout(TAKEN_WITHIN, stream.read_exact(&mut taken)).await {
            Ok(Ok(_)) if taken[0] == TAKEN => Ok(Attachment { stream }),
            Ok(Err(e)) => Err(e),
            _ => Err(std::io::Error::other("the terminal was not taken")),
        }
    }

    /// The job's output, and the keyboard.
    pub fn split(self) -> (tokio::net::unix::OwnedReadHalf, Keys) {
        let (output, input) = self.stream.into_split();
        (output, Keys(input))
    }
}

/// What the attached user sends to the terminal.
pub struct Keys(tokio::net::unix::OwnedWriteHalf);

impl Keys {
    /// Bytes typed, in frames of at most [`MAX_FRAME`].
    pub async fn typed(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        for chunk in bytes.chunks(MAX_FRAME) {
            self.0
                .write_all(&Frame::Input(chunk.to_vec()).encode())
                .await?;
        }
        Ok(())
    }

    /// The window is now `rows` by `cols`.
    pub async fn resize(&mut self, rows: u16, cols: u16) -> std::io::Result<()> {
        self.0
            .write_all(&Frame::Resize { rows, cols }.encode())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn frames_are_read_whole_and_in_order_however_the_bytes_arrive() {
        let mut wire = Frame::Input(b"ls\n".to_vec()).encode();
        wire.extend(
            Frame::Resize {
                rows: 40,
                cols: 120,
            }
            .encode(),
        );
        wire.extend(Frame::Input(b"exit\n".to_vec()).encode());
        let mut buffer = Vec::new();
        let mut frames = Vec::new();
        for byte in wire {
            buffer.push(byte);
            frames.extend(Frame::take_all(&mut buffer).expect("frames"));
        }
        assert_eq!(
            frames,
            [
                Frame::Input(b"ls\n".to_vec()),
                Frame::Resize {
                    rows: 40,
                    cols: 120
                },
                Frame::Input(b"exit\n".to_vec()),
            ]
        );
        assert!(buffer.is_empty());
        let mut bad = vec![7, 0, 0];
        assert!(Frame::take_all(&mut bad).is_err());
        let mut short_resize = vec![1, 0, 2, 0, 1];
        assert!(Frame::take_all(&mut short_resize).is_err());
    }

    #[test]
    fn a_terminal_carries_bytes_both_ways() {
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        let pty = open(uid, gid).expect("a pty");
        let mut slave = std::fs::File::from(pty.slave);
        let mut master = std::fs::File::from(pty.master);
        slave.write_all(b"hello\n").expect("write");
        let mut got = [0u8; 64];
        let n = master.read(&mut got).expect("read");
        assert!(got[..n].starts_with(b"hello"), "{:?}", &got[..n]);
    }
}
