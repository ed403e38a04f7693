//! Simulated web traders: the web side's way into the venue, without HTTP.
//!
//! A REST or WebSocket call, once authenticated, is a request in the web's own intake ring
//! under a web session of its own (`WebBridge::submit`, what `WebBridge::call` does before it
//! waits). The engine stage sends the web's replies, and every user's fills and
//! cancellations, into the web's outbound ring; `WebDelivery`, on the gateway thread in
//! `rialto serve`, answers each call and hands the users' messages over in batches through a
//! bounded queue. A trader here keeps its view of its open orders from its replies and those
//! batches alone, as a web client does from its REST answers and its private stream. A batch
//! that carries a gap (the queue was full, server/src/web/bridge.rs) sends the trader back to
//! a report once its calls are answered, as the console does.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use rialto_core::{Command, SymbolId, UserId};
use rialto_server::event::{Event, Outbound};
use rialto_server::pipeline::{Op, Reply, Request};
use rialto_server::ring::Ring;
use rialto_server::web::bridge::{WebBatch, WebBridge, WebDelivery, message_seq};
use tokio::sync::{mpsc, oneshot};

use crate::client::{Client, Link};
use crate::rng::Rng;

/// The web traders' users (the binary traders are 1 to 8, the FIX traders 21 and 22).
pub const WEB_USERS: [UserId; 2] = [31, 32];

/// The web side of one server process: its bridge (both rings), the queue of users' messages
/// and the delivery agent. A crash drops it with the process.
pub struct WebProcess {
    bridge: Arc<WebBridge>,
    batches: mpsc::Receiver<WebBatch>,
    delivery: WebDelivery,
}

impl WebProcess {
    /// `user_message_batches` bounds the queue of users' messages, as `[web]
    /// user_message_batches` does.
    pub fn new(user_message_batches: usize, now: Instant) -> WebProcess {
        let (bridge, batches) = WebBridge::new(user_message_batches);
        let delivery = WebDelivery::new(bridge.clone(), Default::default(), now);
        WebProcess {
            bridge,
            batches,
            delivery,
        }
    }

    /// The web's intake ring, for `PipelineConfig::intakes`.
    pub fn intake(&self) -> Arc<Ring<Request>> {
        self.bridge.intake()
    }

    /// The web's outbound ring, for `PipelineConfig::web_outbound`.
    pub fn outlet(&self) -> Arc<Ring<Outbound>> {
        self.bridge.outlet()
    }

    /// A gap waits to be announced: the delivery does so alone only once
    /// `WEB_MESSAGES_WAIT` has passed since its last hand-over, and until then the traders
    /// whose messages it lost cannot know it.
    pub fn gap_pending(&self) -> bool {
        self.delivery.has_gap()
    }
}

struct WebTrader {
    client: Client,
    /// Its calls, oldest first: where each one's reply comes.
    calls: VecDeque<oneshot::Receiver<Event>>,
    /// A gap in its messages: its view waits for a report.
    gapped: bool,
    next_report: u64,
}

/// The web traders, who outlive server processes.
pub struct WebTraders {
    traders: Vec<WebTrader>,
    /// Order requests submitted (reports not counted, as for the binary traders).
    pub commands: u64,
    /// Batches of users' messages that carried a gap.
    pub gaps: u64,
}

impl WebTraders {
    pub fn new() -> WebTraders {
        WebTraders {
            traders: WEB_USERS
                .iter()
                .map(|&user| WebTrader {
                    client: Client::new(user),
                    calls: VecDeque::new(),
                    gapped: false,
                    next_report: 1,
                })
                .collect(),
            commands: 0,
            gaps: 0,
        }
    }

    /// A new server process: every call on the way died with the old one, and what was
    /// applied is in the report each trader asks for now.
    pub fn start(&mut self, process: &WebProcess) {
        for trader in &mut self.traders {
            trader.client.node_died();
            trader.calls.clear();
            trader.gapped = false;
            ask_report(trader, process);
        }
    }

    /// Each trading trader builds a request now and then.
    pub fn act(&mut self, rng: &mut Rng, symbols: &[SymbolId]) {
        for trader in &mut self.traders {
            if trader.client.link == Link::Trading && !trader.gapped && rng.chance(400_000) {
                trader.client.act(rng, symbols);
            }
        }
    }

    /// Submits what the traders built, oldest first, while the web's intake ring has room;
    /// and the report a trader waits to ask for. Returns the calls submitted.
    pub fn send(&mut self, process: &WebProcess) -> usize {
        let mut calls = 0;
        for trader in &mut self.traders {
            if trader.client.link == Link::Refused && ask_report(trader, process) {
                calls += 1;
            }
            while let Some(request) = trader.client.outbox.front() {
                let Ok((_, reply)) = process.bridge.submit(request.reply, request.op.clone())
                else {
                    break; // the ring is full: the trader tries again later
                };
                trader.calls.push_back(reply);
                trader.client.sent();
                self.commands += 1;
                calls += 1;
            }
        }
        calls
    }

    /// The delivery agent's duty cycle, then what it delivered: the traders' replies and
    /// their messages, in pipeline order. With `flush`, the messages it gathers go out now
    /// rather than within `WEB_MESSAGES_WAIT`. Returns the highest seq a trader was told of.
    pub fn deliver(
        &mut self,
        process: &mut WebProcess,
        now: Instant,
        flush: bool,
        note: &mut dyn FnMut(String),
    ) -> Result<u64, String> {
        process.delivery.do_work(now);
        if flush {
            process.delivery.flush(now, true);
        }
        // The engine stage sends a command's reply before its events, and answers a report
        // (a query, at the last command's seq) after every event before it: sorting by
        // (seq, rank) restores the one stream the two channels split.
        let mut stream: Vec<(u64, u8, usize, Event)> = Vec::new();
        while let Ok(batch) = process.batches.try_recv() {
            if let Some(gap) = &batch.gap {
                self.gaps += 1;
                for trader in &mut self.traders {
                    if gap.users.contains_key(&trader.client.user) {
                        trader.gapped = true;
                    }
                }
            }
            for (user, event) in batch.messages {
                let at = self
                    .traders
                    .iter()
                    .position(|t| Some(t.client.user) == user);
                if let Some(at) = at {
                    stream.push((message_seq(&event), 1, at, event));
                }
            }
        }
        for (at, trader) in self.traders.iter_mut().enumerate() {
            // A request refused before the journal has no seq: it keeps its place among the
            // trader's replies.
            let mut floor = 0;
            while let Some(call) = trader.calls.front_mut() {
                let Ok(event) = call.try_recv() else {
                    break; // not answered yet (calls are answered in order)
                };
                trader.calls.pop_front();
                let rank = match event {
                    Event::Report { .. } => 2,
                    _ => 0,
                };
                floor = floor.max(reply_seq(&event));
                stream.push((floor, rank, at, event));
            }
        }
        // Stable: a trader's replies of one seq stay in their order.
        stream.sort_by_key(|&(seq, rank, at, _)| (seq, rank, at));
        let mut max_seq = 0;
        for (seq, rank, at, event) in stream {
            let trader = &mut self.traders[at];
            let Some(msg) = event.into_wire() else {
                continue; // not a binary protocol message (a symbol added): no trader's business
            };
            note(format!("web {} <- {msg:?}", trader.client.user));
            if rank != 1 {
                max_seq = max_seq.max(seq);
            }
            // Behind a gap, only replies count until the report.
            if rank == 1 && trader.gapped {
                continue;
            }
            trader.client.receive(&msg)?;
        }
        for trader in &mut self.traders {
            if trader.gapped && trader.calls.is_empty() && trader.client.outbox.is_empty() {
                // Every call answered: the report shows what the lost messages would have.
                trader.gapped = false;
                trader.client.link = Link::Refused;
            }
        }
        Ok(max_seq)
    }

    /// Every call answered and nothing waiting to be sent or asked.
    pub fn answered(&self) -> bool {
        self.traders
            .iter()
            .all(|t| !t.gapped && t.client.outbox.is_empty() && t.client.answered())
    }

    pub fn clients(&self) -> impl Iterator<Item = &Client> {
        self.traders.iter().map(|t| &t.client)
    }
}

impl Default for WebTraders {
    fn default() -> Self {
        WebTraders::new()
    }
}

/// Asks for the trader's report (its open orders), unless the web's ring is full (then it
/// stays `Refused` and asks again later). Returns whether it asked.
fn ask_report(trader: &mut WebTrader, process: &WebProcess) -> bool {
    let request = trader.next_report;
    let user = trader.client.user;
    let op = Op::Command(Command::UserReport { user });
    let Ok((_, reply)) = process.bridge.submit(Reply::Report { request }, op) else {
        return false;
    };
    trader.next_report += 1;
    trader.calls.push_back(reply);
    trader.client.link = Link::Reporting { request };
    true
}

/// The seq a reply carries: its command's, or for a report the last command's before it.
fn reply_seq(event: &Event) -> u64 {
    match *event {
        Event::Accepted { seq, .. } | Event::Rejected { seq, .. } | Event::Report { seq, .. } => {
            seq
        }
        _ => 0,
    }
}
