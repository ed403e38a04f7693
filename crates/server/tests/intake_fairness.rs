//! A binary-protocol flood cannot starve FIX: the journal stage takes from the gateways'
//! intake rings in turn (docs/architecture.md, "Threads", `rialto-journal`), so an order at
//! the head of the FIX gateway's own ring goes into one of the next 3 batches (3 intakes:
//! binary, web, FIX), behind at most 2 × `batch_max` requests of the other gateways, however
//! full the binary sessions keep the inbound ring.
//!
//! The real journal and engine stages, stepped on this thread as the simulator runs them
//! (`Pipeline::start_simulated`): no sockets, no sleeps, no timing.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use rialto_core::{Command, Engine, PlaceOrder, Side};
use rialto_server::auth::Credentials;
use rialto_server::fix::FIX_SESSION_BASE;
use rialto_server::pipeline::{
    Clock, Event, Op, Outbound, Pipeline, PipelineConfig, Reply, Request, Target,
};
use rialto_server::replication::CommandLog;
use rialto_server::ring::Ring;
use rialto_server::simlog::{SimDisk, SimulatedLog};
use rialto_wire::RequestKind;

const RING: usize = 256;
const BATCH: usize = 32;

fn place(session: u64, user: i64, order: i64, symbol: rialto_core::SymbolId) -> Request {
    Request {
        session,
        reply: Reply::Order {
            order,
            kind: RequestKind::Place,
        },
        op: Op::Command(Command::Place(PlaceOrder::limit(
            user,
            order,
            symbol,
            Side::Buy,
            1,
            1,
        ))),
    }
}

#[test]
fn fix_orders_are_sequenced_within_a_batch_of_each_other_intake_while_binary_sessions_flood() {
    // The server's intakes: the inbound ring (binary sessions), the web's, the FIX gateway's.
    let web = Ring::new(RING);
    let fix = Ring::new(RING);
    let config = PipelineConfig::simulated(
        RING,
        BATCH,
        std::env::temp_dir(),
        vec![web.clone(), fix.clone()],
    );
    let disk = Arc::new(Mutex::new(SimDisk::new()));
    let mut pipeline = Pipeline::start_simulated(
        config,
        Engine::new(Default::default()),
        CommandLog::Simulated(SimulatedLog::new(disk)),
        Arc::new(Credentials::from_key([7; 32])),
        Clock::Simulated(Arc::new(AtomicI64::new(1_000_000_000))),
    )
    .unwrap();
    pipeline
        .apply_system_commands(
            rialto_server::demo::demo_commands(),
            std::time::Duration::from_secs(60),
        )
        .unwrap();
    let symbol = pipeline.inline_engine().unwrap().symbol_id("BTC-USD");
    let set_up = pipeline.inline_engine().unwrap().last_seq();
    while pipeline.outbound.pop().is_some() {}

    // Binary sessions 1..=4 (users 1..=4) keep the inbound ring full.
    let mut flood_sent = 0u64;
    let mut flood = |pipeline: &Pipeline| {
        loop {
            let k = flood_sent;
            let request = place(1 + k % 4, 1 + (k % 4) as i64, 1_000_000 + k as i64, symbol);
            if pipeline.inbound.try_push(request).is_err() {
                break;
            }
            flood_sent += 1;
        }
        assert!(pipeline.inbound.is_full());
    };
    flood(&pipeline);
    // Then a FIX session (user 5) sends three orders.
    let fix_session = FIX_SESSION_BASE + 1;
    for order in 1..=3 {
        assert!(fix.try_push(place(fix_session, 5, order, symbol)).is_ok());
    }

    // Each reply in the order the engine stage gave it: (session, seq, accepted).
    let mut replies: Vec<(u64, u64, bool)> = Vec::new();
    let fix_answered =
        |replies: &[(u64, u64, bool)]| replies.iter().filter(|r| r.0 == fix_session).count();
    let mut rounds = 0;
    while fix_answered(&replies) < 3 {
        rounds += 1;
        assert!(
            rounds <= 1_000,
            "the FIX orders were not answered while the flood went on: {} flood replies",
            replies.len()
        );
        pipeline.step_journal();
        pipeline.step_engine();
        while let Some(Outbound { target, event }) = pipeline.outbound.pop() {
            let Target::Session(session) = target else {
                continue;
            };
            match event {
                Event::Accepted { seq, .. } => replies.push((session, seq, true)),
                Event::Rejected { seq, .. } => replies.push((session, seq, false)),
                _ => {}
            }
        }
        flood(&pipeline);
    }

    let fix_replies: Vec<_> = replies.iter().filter(|r| r.0 == fix_session).collect();
    assert!(
        fix_replies.iter().all(|r| r.2),
        "FIX orders accepted: {fix_replies:?}"
    );
    // At most 2 batches' worth of the other gateways' requests come first: here the batch
    // that starts at the inbound ring, then the one that starts at the (empty) web ring
    // reaches the FIX ring.
    let bound = set_up + 2 * BATCH as u64 + 3;
    assert!(
        fix_replies.iter().all(|r| r.1 <= bound),
        "FIX orders sequenced by seq {bound}: {fix_replies:?}"
    );
    let flood_before = replies.iter().take_while(|r| r.0 != fix_session).count();
    assert!(
        flood_before <= 2 * BATCH,
        "{flood_before} flood commands answered before the first FIX order"
    );
    // Meanwhile the flood kept its ring full (`flood` asserts it after every step): without
    // the turns, the FIX orders would wait for all of it.
    assert!(flood_sent > RING as u64, "{flood_sent} sent");
    // Each gateway's own order is kept.
    let seqs: Vec<u64> = fix_replies.iter().map(|r| r.1).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}
