//! One connection of a scripted server on 127.0.0.1, for the client's tests: it decodes the
//! client's frames with `decode_client` and answers with `encode_server`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use rialto_wire::{ClientMsg, ServerMsg, decode_client, encode_server};

/// Every socket's read timeout, so that a bug fails a test instead of hanging it.
pub const TIMEOUT: Duration = Duration::from_secs(5);

pub struct ScriptedConn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl ScriptedConn {
    /// Accepts the next connection on `listener`.
    pub fn accept(listener: &TcpListener) -> ScriptedConn {
        let (stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        ScriptedConn {
            stream,
            buf: Vec::new(),
        }
    }

    /// The client's next message.
    pub fn recv(&mut self) -> ClientMsg {
        loop {
            if let Some((msg, used)) = decode_client(&self.buf).expect("client sent a bad frame") {
                self.buf.drain(..used);
                return msg;
            }
            let mut chunk = [0u8; 1024];
            let n = self.stream.read(&mut chunk).expect("scripted server read");
            assert!(n > 0, "client closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn send(&mut self, msg: &ServerMsg) {
        let mut out = Vec::new();
        encode_server(msg, &mut out);
        self.send_raw(&out);
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }
}
