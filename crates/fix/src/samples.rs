//! Sample messages shared by the benchmarks, the allocation test and `rialto bench fix`:
//! the 214-byte NewOrderSingle the FIX speed targets are stated for, and a typical fill.

use crate::app::{ExecutionReport, exec_type, ord_status};
use crate::{ApplVersion, Decimal, MessageWriter, Version, tags};

/// A FIX 4.4 NewOrderSingle of 214 bytes, the same bytes as QuickFIX/J's baseline in
/// interop/quickfixj (`CodecBench`), so the two are timed on one message.
pub const NEW_ORDER_SINGLE: &[u8] = b"8=FIX.4.4\x019=191\x0135=D\x0134=1234567\x0149=TRADER1\x01\
52=20261121-10:00:00.123456\x0156=RIALTO\x011=TRADER1-ACCOUNT\x01\
11=CL-20261121-000000001\x0121=1\x0118=6\x0138=0.005\x0140=2\x0144=100.25\x01\
54=1\x0155=BTC-USD\x0159=1\x0160=20261121-10:00:00.123456\x0110=144\x01";

/// A partial fill, as the gateway reports one.
pub fn fill_report() -> ExecutionReport<'static> {
    ExecutionReport {
        order_id: b"281474976710657",
        exec_id: b"1234567.89",
        cl_ord_id: b"CL-20261121-000000001",
        orig_cl_ord_id: None,
        exec_type: exec_type::TRADE,
        ord_status: ord_status::PARTIALLY_FILLED,
        symbol: b"BTC-USD",
        side: b'1',
        ord_type: Some(b'2'),
        time_in_force: Some(b'1'),
        price: Some(Decimal::new(10025, 2)),
        order_qty: Some(Decimal::new(5, 3)),
        last: Some((Decimal::new(10025, 2), Decimal::new(2, 3))),
        leaves_qty: Decimal::new(3, 3),
        cum_qty: Decimal::new(2, 3),
        avg_px: Decimal::new(10025, 2),
        ord_rej_reason: None,
        transact_time_ns: 1_795_322_669_123_000_000,
        text: None,
        stop_px: None,
        shown_qty: None,
        expire_time_ns: None,
    }
}

/// Writes a whole ExecutionReport with its standard header into `out` (what the session layer
/// does for every report).
pub fn write_execution_report(
    out: &mut Vec<u8>,
    report: &ExecutionReport<'_>,
    seq: u64,
    now_ns: i64,
) {
    let mut w = MessageWriter::begin(out, Version::Fix44.begin_string(), b"8");
    w.str(tags::SENDER_COMP_ID, b"RIALTO")
        .str(tags::TARGET_COMP_ID, b"TRADER1")
        .uint(tags::MSG_SEQ_NUM, seq)
        .timestamp(tags::SENDING_TIME, now_ns);
    report.write(ApplVersion::Fix44, &mut w);
    w.finish();
}
