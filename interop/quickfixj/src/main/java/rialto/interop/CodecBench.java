package rialto.interop;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.LocalDateTime;
import java.util.Arrays;
import java.util.Set;

import quickfix.DataDictionary;
import quickfix.Message;
import quickfix.UtcTimestampPrecision;
import quickfix.field.Account;
import quickfix.field.AvgPx;
import quickfix.field.ClOrdID;
import quickfix.field.CumQty;
import quickfix.field.ExecID;
import quickfix.field.ExecType;
import quickfix.field.LastPx;
import quickfix.field.LastQty;
import quickfix.field.LeavesQty;
import quickfix.field.OrdStatus;
import quickfix.field.OrdType;
import quickfix.field.OrderID;
import quickfix.field.OrderQty;
import quickfix.field.Price;
import quickfix.field.Side;
import quickfix.field.Symbol;
import quickfix.field.TimeInForce;
import quickfix.field.TransactTime;
import quickfix.fix44.ExecutionReport;
import quickfix.fix44.NewOrderSingle;

/**
 * QuickFIX/J's codec cost, the baseline for Rialto's FIX codec benchmark.
 *
 * <p>(a) parse_new_order_single: the 214-byte FIX.4.4 NewOrderSingle below into a
 * {@code quickfix.fix44.NewOrderSingle} the way a QuickFIX/J acceptor does it (parse against the
 * FIX44 data dictionary with body length and checksum checked, then the dictionary's validation
 * of the whole message with QuickFIX/J's default checks on), then reading ClOrdID, Side, Symbol,
 * OrderQty, Price, OrdType and TimeInForce through the typed getters (OrderQty and Price come back
 * as doubles: that is QuickFIX/J's generated API).
 *
 * <p>(b) encode_execution_report: building a {@code quickfix.fix44.ExecutionReport} with 17 body
 * fields (a partial fill) and the header a session fills in (BeginString, MsgType,
 * SenderCompID, TargetCompID, MsgSeqNum, SendingTime), then {@code toString()}, which computes
 * BodyLength and CheckSum. Timestamps are fixed values (the clock is not part of the codec).
 *
 * <p>Each: warm-up rounds, then R rounds of N operations; per round ns/op; the median is printed.
 */
public final class CodecBench {
    static final String USAGE = String.join("\n",
            "usage: java -cp 'target/classes:target/dependency/*' rialto.interop.CodecBench",
            "         [--rounds 20] [--iterations 100000] [--warmup-rounds 5] [--print-message]",
            "  --print-message  print the NewOrderSingle used, SOH shown as '|', and exit");

    /**
     * The NewOrderSingle parsed, 214 bytes; '|' stands for SOH (0x01) here only, the bytes have
     * SOH. BodyLength 191 and CheckSum 144 are for the SOH form:
     * 8=FIX.4.4|9=191|35=D|34=1234567|49=TRADER1|52=20261121-10:00:00.123456|56=RIALTO|
     * 1=TRADER1-ACCOUNT|11=CL-20261121-000000001|21=1|18=6|38=0.005|40=2|44=100.25|54=1|
     * 55=BTC-USD|59=1|60=20261121-10:00:00.123456|10=144|
     */
    static final String NEW_ORDER_SINGLE = ("8=FIX.4.4|9=191|35=D|34=1234567|49=TRADER1"
            + "|52=20261121-10:00:00.123456|56=RIALTO|1=TRADER1-ACCOUNT|11=CL-20261121-000000001"
            + "|21=1|18=6|38=0.005|40=2|44=100.25|54=1|55=BTC-USD|59=1"
            + "|60=20261121-10:00:00.123456|10=144|").replace('|', Fix.SOH);

    private static final LocalDateTime SENDING_TIME = LocalDateTime.of(2026, 11, 21, 10, 0, 0,
            123_000_000);
    private static final LocalDateTime TRANSACT_TIME = LocalDateTime.of(2026, 11, 21, 10, 0, 0,
            122_000_000);

    /** Keeps the JIT from discarding the work. */
    private static volatile long sink;

    public static void main(String[] argv) throws Exception {
        Args args = Args.parse(argv, Set.of("--rounds", "--iterations", "--warmup-rounds"),
                Set.of("--print-message"), USAGE);
        if (args.flag("--print-message")) {
            System.out.println(Fix.readable(NEW_ORDER_SINGLE));
            return;
        }
        int rounds = args.integer("--rounds", 20, USAGE);
        int iterations = args.integer("--iterations", 100_000, USAGE);
        int warmupRounds = args.integer("--warmup-rounds", 5, USAGE);
        if (rounds < 1 || iterations < 1 || warmupRounds < 0) {
            Args.usageError(USAGE, "rounds and iterations must be positive");
        }

        DataDictionary dictionary = new DataDictionary("FIX44.xml");
        checkParse(dictionary);
        String sample = encodeExecutionReport(1);

        Result parse = measure(warmupRounds, rounds, iterations, n -> parseRound(dictionary, n));
        Result encode = measure(warmupRounds, rounds, iterations, CodecBench::encodeRound);

        System.out.printf("quickfixj parse_new_order_single median_ns=%.1f bytes=%d%n",
                median(parse.wall), NEW_ORDER_SINGLE.length());
        System.out.printf("quickfixj encode_execution_report median_ns=%.1f bytes=%d%n",
                median(encode.wall), sample.length());
        System.err.printf("(%d rounds x %d ops after %d warm-up rounds, JVM %s)%n", rounds,
                iterations, warmupRounds, System.getProperty("java.vm.version"));
        for (String name : new String[] {"parse", "encode"}) {
            Result r = name.equals("parse") ? parse : encode;
            System.err.printf("(%s wall ns/op min %.1f max %.1f; thread CPU ns/op median %.1f)%n",
                    name, min(r.wall), max(r.wall), median(r.cpu));
        }
    }

    private interface Round {
        long run(int iterations) throws Exception;
    }

    /** Per round: wall-clock ns/op, and the thread's CPU ns/op (this VM's cores are shared). */
    private record Result(double[] wall, double[] cpu) {}

    private static Result measure(int warmupRounds, int rounds, int iterations, Round round)
            throws Exception {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        for (int i = 0; i < warmupRounds; i++) {
            sink += round.run(iterations);
        }
        double[] wall = new double[rounds];
        double[] cpu = new double[rounds];
        for (int i = 0; i < rounds; i++) {
            long cpuStart = threads.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            sink += round.run(iterations);
            wall[i] = (System.nanoTime() - start) / (double) iterations;
            cpu[i] = (threads.getCurrentThreadCpuTime() - cpuStart) / (double) iterations;
        }
        return new Result(wall, cpu);
    }

    private static NewOrderSingle parse(DataDictionary dictionary) throws Exception {
        NewOrderSingle m = new NewOrderSingle();
        m.fromString(NEW_ORDER_SINGLE, dictionary, dictionary, true, true);
        dictionary.validate(m);
        return m;
    }

    private static long parseRound(DataDictionary dictionary, int iterations) throws Exception {
        long acc = 0;
        for (int i = 0; i < iterations; i++) {
            NewOrderSingle m = parse(dictionary);
            acc += m.getClOrdID().getValue().length() + m.getSide().getValue()
                    + m.getSymbol().getValue().length()
                    + (long) (m.getOrderQty().getValue() * 1000.0)
                    + (long) (m.getPrice().getValue() * 100.0)
                    + m.getOrdType().getValue() + m.getTimeInForce().getValue();
        }
        return acc;
    }

    /** The parse must see what the message says, or the figure means nothing. */
    private static void checkParse(DataDictionary dictionary) throws Exception {
        NewOrderSingle m = parse(dictionary);
        boolean ok = m.getClOrdID().getValue().equals("CL-20261121-000000001")
                && m.getSide().getValue() == '1' && m.getSymbol().getValue().equals("BTC-USD")
                && m.getOrderQty().getValue() == 0.005 && m.getPrice().getValue() == 100.25
                && m.getOrdType().getValue() == '2' && m.getTimeInForce().getValue() == '1'
                && NEW_ORDER_SINGLE.length() == 214;
        if (!ok) {
            throw new IllegalStateException("the NewOrderSingle did not parse as expected: " + m);
        }
    }

    private static String encodeExecutionReport(int seq) {
        ExecutionReport er = new ExecutionReport(new OrderID("O-000000123456"),
                new ExecID("E-000000654321"), new ExecType(ExecType.TRADE),
                new OrdStatus(OrdStatus.PARTIALLY_FILLED), new Side(Side.BUY),
                new LeavesQty(0.003), new CumQty(0.002), new AvgPx(100.25));
        Message.Header h = er.getHeader();
        h.setString(49, "RIALTO");
        h.setString(56, "TRADER1");
        h.setInt(34, seq);
        h.setUtcTimeStamp(52, SENDING_TIME, UtcTimestampPrecision.MILLIS);
        er.set(new ClOrdID("CL-20261121-000000001"));
        er.set(new Account("TRADER1-ACCOUNT"));
        er.set(new Symbol("BTC-USD"));
        er.set(new OrderQty(0.005));
        er.set(new OrdType(OrdType.LIMIT));
        er.set(new Price(100.25));
        er.set(new TimeInForce(TimeInForce.GOOD_TILL_CANCEL));
        er.set(new LastPx(100.25));
        er.set(new LastQty(0.002));
        er.set(new TransactTime(TRANSACT_TIME));
        return er.toString();
    }

    private static long encodeRound(int iterations) {
        long acc = 0;
        for (int i = 0; i < iterations; i++) {
            acc += encodeExecutionReport(i + 1).length();
        }
        return acc;
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    }

    private static double min(double[] values) {
        return Arrays.stream(values).min().orElse(Double.NaN);
    }

    private static double max(double[] values) {
        return Arrays.stream(values).max().orElse(Double.NaN);
    }
}
