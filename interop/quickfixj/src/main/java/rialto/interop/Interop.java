package rialto.interop;

import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;

import quickfix.Application;
import quickfix.CompositeLogFactory;
import quickfix.ConfigError;
import quickfix.DefaultMessageFactory;
import quickfix.Dictionary;
import quickfix.FileStoreFactory;
import quickfix.LogFactory;
import quickfix.MemoryStoreFactory;
import quickfix.Message;
import quickfix.MessageStoreFactory;
import quickfix.SLF4JLogFactory;
import quickfix.Session;
import quickfix.SessionID;
import quickfix.SessionSettings;
import quickfix.SocketInitiator;
import quickfix.field.ExpireTime;
import quickfix.field.TransactTime;
import quickfix.field.converter.UtcTimestampConverter;

/**
 * The FIX interop test: two QuickFIX/J initiators (TRADER1 as user 1, TRADER2 as user 2) run a
 * scripted scenario against Rialto's acceptor and check every field of every reply.
 *
 * <p>Prints {@code ok step N: ...} per step (step 0 is the logon, step 16 the final logout) and
 * exits 0; on the first failure prints {@code FAIL step N: expected ..., got ...}, dumps the
 * last raw messages of both sessions to stderr and exits 1; exits 2 when the overall timeout
 * passes; 3 on a bad command line.
 */
public final class Interop {
    static final String USAGE = String.join("\n",
            "usage: java -cp 'target/classes:target/dependency/*' rialto.interop.Interop",
            "         --port P --begin FIX.4.4|FIXT.1.1 --secret1 HEX --secret2 HEX",
            "         (--store DIR | --memory-store) [--timeout SECONDS] [--step-timeout-ms MS]",
            "         [--steps 1,2,...] [--allow-udf]",
            "  --store DIR        QuickFIX/J file store (use a fresh directory per acceptor run:",
            "                     sequence numbers carry over from what is in it)",
            "  --memory-store     keep the sessions' messages in memory instead",
            "  --timeout          overall limit, default 60 s (exit 2 when passed)",
            "  --step-timeout-ms  how long to wait for each expected message, default 5000",
            "  --steps            run only these of steps 1..15 (logon and logout always run);",
            "                     each of 2..5 needs the one before it",
            "  --allow-udf        accept user-defined tags (5000+) the dictionary does not know;",
            "                     every standard check stays on");

    static final int EXIT_PASS = 0;
    static final int EXIT_FAIL = 1;
    static final int EXIT_TIMEOUT = 2;

    /** How long to stay quiet after a reply that must not be followed by a duplicate. */
    private static final long QUIET_MS = 300;
    private static final long LOGON_TIMEOUT_MS = 10_000;

    private final Trader trader1;
    private final Trader trader2;
    private final String begin;
    private final int port;
    private final String storeDir;
    private final long stepTimeoutMs;
    private final boolean allowUserDefinedFields;
    private final Set<Integer> steps = new TreeSet<>();
    /** ClOrdIDs are prefixed with this, so reruns against the same acceptor do not collide. */
    private final String runId = Long.toString(System.currentTimeMillis(), 36);
    private int clOrdSeq;
    private final Set<String> execIdsSeen = new HashSet<>();
    /** Orders believed live at the acceptor, by current ClOrdID: cancelled on the way out. */
    private final Map<String, LiveOrder> live = new LinkedHashMap<>();

    private volatile int step;
    private volatile boolean reported;
    private SocketInitiator initiator;

    private interface Step {
        void run() throws Exception;
    }

    /** Steps 1..5 work on one order of TRADER1's: its current ClOrdID and its OrderID. */
    private String orderAClOrdId;
    private String orderAId;

    private record LiveOrder(Trader trader, char side, String qty) {}

    /** One message seen by a session's callbacks, in or out. */
    record Event(boolean incoming, String msgType, Message msg) {}

    /** A step's expectation was not met. */
    static final class Failure extends Exception {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }
    }

    /** One initiator session and what it has seen. */
    static final class Trader {
        final int user;
        final String name;
        final String secret;
        final SessionID id;
        /** Application messages, plus Rejects and Logouts either way: what a step waits on. */
        final BlockingQueue<Event> inbox = new LinkedBlockingQueue<>();
        /** Every admin message either way, and our own application messages resent as PossDup. */
        final List<Event> adminLog = new CopyOnWriteArrayList<>();
        final Fix.RecentLog recent = new Fix.RecentLog();
        /** True while a Logout we started is under way: its exchange is not a step's business. */
        volatile boolean loggingOut;

        Trader(int user, String secret, String begin) {
            this.user = user;
            this.name = Fix.clientCompId(user);
            this.secret = secret;
            this.id = new SessionID(begin, name, Fix.ACCEPTOR_COMP_ID);
        }

        Session session() {
            return Session.lookupSession(id);
        }

        boolean loggedOn() {
            Session s = session();
            return s != null && s.isLoggedOn();
        }
    }

    private Interop(Args args) {
        begin = args.require("--begin", USAGE);
        if (!begin.equals(Fix.FIX44) && !begin.equals(Fix.FIXT11)) {
            Args.usageError(USAGE, "--begin must be FIX.4.4 or FIXT.1.1");
        }
        port = args.integer("--port", 0, USAGE);
        if (port <= 0 || port > 65535) {
            Args.usageError(USAGE, "--port is required (1..65535)");
        }
        boolean memoryStore = args.flag("--memory-store");
        boolean fileStore = args.get("--store", null) != null;
        if (memoryStore == fileStore) {
            Args.usageError(USAGE, "give exactly one of --store DIR and --memory-store");
        }
        storeDir = args.get("--store", null);
        stepTimeoutMs = args.integer("--step-timeout-ms", 5000, USAGE);
        allowUserDefinedFields = args.flag("--allow-udf");
        for (String n : args.get("--steps", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15").split(",")) {
            try {
                steps.add(Integer.parseInt(n.trim()));
            } catch (NumberFormatException e) {
                Args.usageError(USAGE, "--steps takes numbers 1..15 separated by commas");
            }
        }
        for (int n : steps) {
            if (n < 1 || n > 15 || (n >= 2 && n <= 5 && !steps.contains(n - 1))) {
                Args.usageError(USAGE, "--steps: no step " + n + " without step " + (n - 1));
            }
        }
        trader1 = new Trader(1, args.require("--secret1", USAGE), begin);
        trader2 = new Trader(2, args.require("--secret2", USAGE), begin);
    }

    public static void main(String[] argv) {
        Args args = Args.parse(argv,
                Set.of("--port", "--begin", "--secret1", "--secret2", "--store", "--timeout",
                        "--step-timeout-ms", "--steps"),
                Set.of("--memory-store", "--allow-udf"), USAGE);
        int timeoutSeconds = args.integer("--timeout", 60, USAGE);
        Interop test = new Interop(args);
        test.startWatchdog(timeoutSeconds);
        int code = test.run();
        exit(code);
    }

    private static void exit(int code) {
        System.out.flush();
        System.err.flush();
        // halt, not exit: nothing left to run, and no QuickFIX/J thread may keep us alive.
        Runtime.getRuntime().halt(code);
    }

    /** The test must never hang: past the overall limit it reports where it was and exits 2. */
    private void startWatchdog(int timeoutSeconds) {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(timeoutSeconds * 1000L);
            } catch (InterruptedException e) {
                return;
            }
            synchronized (this) {
                if (reported) {
                    // The failure is already printed; only the clean-up overran.
                    exit(EXIT_FAIL);
                }
                reported = true;
                System.out.println("FAIL step " + step + ": overall timeout of " + timeoutSeconds
                        + " s passed before the scenario finished");
                dumpRecent();
            }
            exit(EXIT_TIMEOUT);
        }, "interop-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    private int run() {
        try {
            start();
            logonStep();
            List<Step> scenario = List.of(this::step1NewOrder, this::step2Fill,
                    this::step3ReplacePrice, this::step4ReplaceQtyDown, this::step5Cancel,
                    this::step6UnknownOrder, this::step7OffGridPrice, this::step8DuplicateClOrdId,
                    this::step9GapFromClient, this::step10ResendFromAcceptor,
                    this::step11MessagesLostOnTheWire, this::step12StopTriggeredByATrade,
                    this::step13IcebergFilledAcrossRefills, this::step14GtdExpires,
                    this::step15ReplaceOfAStopLimitGtd);
            for (int n : steps) {
                begin(n);
                scenario.get(n - 1).run();
            }
            logoutStep();
            initiator.stop(true);
            return EXIT_PASS;
        } catch (Failure f) {
            synchronized (this) {
                if (!reported) {
                    reported = true;
                    System.out.println("FAIL step " + step + ": " + f.getMessage());
                    dumpRecent();
                }
            }
            cleanUp();
            return EXIT_FAIL;
        } catch (Exception e) {
            synchronized (this) {
                if (!reported) {
                    reported = true;
                    System.out.println("FAIL step " + step + ": unexpected " + e);
                    e.printStackTrace();
                    dumpRecent();
                }
            }
            cleanUp();
            return EXIT_FAIL;
        }
    }

    // ---------------------------------------------------------------------------------------
    // Set-up

    private SessionSettings settings() throws ConfigError {
        SessionSettings s = new SessionSettings();
        s.setString("ConnectionType", "initiator");
        s.setString("SocketConnectHost", "127.0.0.1");
        s.setLong("SocketConnectPort", port);
        s.setString("SocketTcpNoDelay", "Y");
        s.setLong("HeartBtInt", 30);
        s.setLong("ReconnectInterval", 1);
        s.setString("NonStopSession", "Y");
        s.setLong("LogonTimeout", 5);
        s.setLong("LogoutTimeout", 2);
        // Sequence numbers and stored messages survive a logout: step 10 needs that.
        s.setString("ResetOnLogon", "N");
        s.setString("ResetOnLogout", "N");
        s.setString("ResetOnDisconnect", "N");
        s.setString("PersistMessages", "Y");
        // Validation as a default QuickFIX/J counterparty has it, spelled out: what the acceptor
        // sends must pass the standard data dictionary (required fields, enum values, formats,
        // header/body/trailer order, no unknown or empty tags, OrigSendingTime on resends).
        s.setString("UseDataDictionary", "Y");
        s.setString("ValidateIncomingMessage", "Y");
        s.setString("ValidateFieldsOutOfOrder", "Y");
        s.setString("ValidateFieldsHaveValues", "Y");
        s.setString("ValidateUserDefinedFields", allowUserDefinedFields ? "N" : "Y");
        s.setString("AllowUnknownMsgFields", "N");
        s.setString("RejectInvalidMessage", "Y");
        s.setString("RequiresOrigSendingTime", "Y");
        s.setString("CheckLatency", "Y");
        s.setLong("MaxLatency", 120);
        if (begin.equals(Fix.FIXT11)) {
            s.setString("TransportDataDictionary", "FIXT11.xml");
            s.setString("AppDataDictionary", "FIX50SP2.xml");
            s.setString("DefaultApplVerID", "FIX.5.0SP2");
        } else {
            s.setString("DataDictionary", "FIX44.xml");
        }
        if (storeDir != null) {
            s.setString("FileStorePath", storeDir);
        }
        s.setString("SLF4JLogHeartbeats", "N");
        for (Trader t : List.of(trader1, trader2)) {
            Dictionary d = new Dictionary();
            d.setString(SessionSettings.BEGINSTRING, begin);
            d.setString(SessionSettings.SENDERCOMPID, t.name);
            d.setString(SessionSettings.TARGETCOMPID, Fix.ACCEPTOR_COMP_ID);
            s.set(t.id, d);
        }
        return s;
    }

    private void start() throws Exception {
        if (storeDir != null) {
            Path dir = Path.of(storeDir);
            Files.createDirectories(dir);
            try (var files = Files.list(dir)) {
                if (files.findAny().isPresent()) {
                    System.err.println("note: store " + dir + " is not empty: sequence numbers go on"
                            + " from the last run, the acceptor must remember them too");
                }
            }
        }
        SessionSettings settings = settings();
        MessageStoreFactory stores = storeDir != null
                ? new FileStoreFactory(settings) : new MemoryStoreFactory();
        LogFactory logs = new CompositeLogFactory(new LogFactory[] {
            new SLF4JLogFactory(settings),
            id -> trader(id).recent,
        });
        initiator = new SocketInitiator(new Callbacks(), stores, settings, logs,
                new DefaultMessageFactory());
        initiator.start();
    }

    private Trader trader(SessionID id) {
        return id.equals(trader1.id) ? trader1 : trader2;
    }

    /** QuickFIX/J's callbacks: add the credentials to Logon, and file what arrives. */
    private final class Callbacks implements Application {
        @Override
        public void onCreate(SessionID id) {}

        @Override
        public void onLogon(SessionID id) {}

        @Override
        public void onLogout(SessionID id) {}

        @Override
        public void toAdmin(Message m, SessionID id) {
            Trader t = trader(id);
            String type = Fix.msgType(m);
            if (type.equals("A")) {
                m.setString(553, Integer.toString(t.user)); // Username: the venue user id
                m.setString(554, t.secret); // Password: that user's secret
            }
            Event e = new Event(false, type, (Message) m.clone());
            t.adminLog.add(e);
            if (type.equals("3") || (type.equals("5") && !t.loggingOut)) {
                t.inbox.add(e);
            }
        }

        @Override
        public void fromAdmin(Message m, SessionID id) {
            Trader t = trader(id);
            String type = Fix.msgType(m);
            Event e = new Event(true, type, m);
            t.adminLog.add(e);
            if (type.equals("3") || (type.equals("5") && !t.loggingOut)) {
                t.inbox.add(e);
            }
        }

        @Override
        public void toApp(Message m, SessionID id) {
            if ("Y".equals(Fix.get(m.getHeader(), 43))) {
                trader(id).adminLog.add(new Event(false, Fix.msgType(m), (Message) m.clone()));
            }
        }

        @Override
        public void fromApp(Message m, SessionID id) {
            trader(id).inbox.add(new Event(true, Fix.msgType(m), m));
        }
    }

    // ---------------------------------------------------------------------------------------
    // The scenario

    private void begin(int n) {
        step = n;
    }

    private void ok(String what) {
        System.out.println("ok step " + step + ": " + what);
    }

    private String nextClOrdId() {
        return runId + "-" + (++clOrdSeq);
    }

    private void logonStep() throws Failure {
        begin(0);
        if (!waitUntil(() -> trader1.loggedOn() && trader2.loggedOn(), LOGON_TIMEOUT_MS)) {
            StringBuilder why = new StringBuilder("expected both sessions logged on within "
                    + LOGON_TIMEOUT_MS / 1000 + " s to 127.0.0.1:" + port + " as " + begin);
            for (Trader t : List.of(trader1, trader2)) {
                why.append("; ").append(t.name).append(t.loggedOn() ? " logged on" : " not logged on");
                for (Event e : t.adminLog) {
                    if (e.incoming && e.msgType.equals("5")) {
                        why.append(", acceptor's Logout Text=").append(Fix.get(e.msg, 58));
                    }
                }
                List<String> lines = t.recent.lines();
                if (!lines.isEmpty()) {
                    why.append(", last event: ").append(lines.get(lines.size() - 1).trim());
                }
            }
            throw new Failure(why.toString());
        }
        ok("TRADER1 and TRADER2 logged on (" + begin + ", Username/Password on Logon)");
    }

    private void step1NewOrder() throws Exception {
        String c1 = nextClOrdId();
        send(trader1, newOrder(c1, '1', "0.010", "100.00", '1'));
        Message er = expectEr(trader1, er("New").execType('0').ordStatus('0').clOrdId(c1).side('1')
                .orderQty("0.010").cum("0").leaves("0.010").avgPx("0").price("100.00"));
        orderAClOrdId = c1;
        orderAId = Fix.get(er, 37);
        live.put(c1, new LiveOrder(trader1, '1', "0.010"));
        ok("TRADER1 buy 0.010 @ 100.00 GTC -> New, LeavesQty 0.010, OrderID " + orderAId);
    }

    private void step2Fill() throws Exception {
        String c1 = orderAClOrdId;
        String orderA = orderAId;
        String c2 = nextClOrdId();
        send(trader2, newOrder(c2, '2', "0.004", "100.00", '1'));
        Message er = expectEr(trader2, er("New").execType('0').ordStatus('0').clOrdId(c2).side('2')
                .orderQty("0.004").cum("0").leaves("0.004").avgPx("0"));
        String orderB = Fix.get(er, 37);
        if (orderB.equals(orderA)) {
            throw new Failure("expected a new OrderID for TRADER2's order, got TRADER1's " + orderA);
        }
        expectEr(trader2, er("Trade").execType('F').ordStatus('2').clOrdId(c2).side('2')
                .orderQty("0.004").last("100", "0.004").cum("0.004").leaves("0").avgPx("100")
                .orderId(orderB));
        expectEr(trader1, er("Trade").execType('F').ordStatus('1').clOrdId(c1).side('1')
                .orderQty("0.010").last("100", "0.004").cum("0.004").leaves("0.006")
                .avgPx("100").orderId(orderA));
        ok("TRADER2 sell 0.004 @ 100.00 -> New + Trade filled; TRADER1 Trade partial, "
                + "CumQty 0.004 LeavesQty 0.006 AvgPx 100");
    }

    private void step3ReplacePrice() throws Exception {
        String c1 = orderAClOrdId;
        String orderA = orderAId;
        String c3 = nextClOrdId();
        send(trader1, replace(c3, c1, '1', "0.010", "99.50"));
        expectEr(trader1, er("Replaced").execType('5').ordStatus('1').clOrdId(c3).origClOrdId(c1)
                .side('1').orderQty("0.010").cum("0.004").leaves("0.006").avgPx("100")
                .price("99.50").orderId(orderA));
        rename(c1, c3, "0.010");
        orderAClOrdId = c3;
        ok("TRADER1 replace price -> 99.50: Replaced, OrdStatus 1, LeavesQty 0.006");
    }

    private void step4ReplaceQtyDown() throws Exception {
        String c3 = orderAClOrdId;
        String orderA = orderAId;
        String c4 = nextClOrdId();
        send(trader1, replace(c4, c3, '1', "0.008", "99.50"));
        expectEr(trader1, er("Replaced").execType('5').ordStatus('1').clOrdId(c4).origClOrdId(c3)
                .side('1').orderQty("0.008").cum("0.004").leaves("0.004").avgPx("100")
                .price("99.50").orderId(orderA));
        rename(c3, c4, "0.008");
        orderAClOrdId = c4;
        ok("TRADER1 replace OrderQty 0.010 -> 0.008: Replaced, CumQty 0.004, LeavesQty 0.004");
    }

    private void step5Cancel() throws Exception {
        String c4 = orderAClOrdId;
        String orderA = orderAId;
        String c5 = nextClOrdId();
        send(trader1, cancel(c5, c4, '1', "0.008"));
        expectEr(trader1, er("Canceled").execType('4').ordStatus('4').clOrdId(c5).origClOrdId(c4)
                .side('1').orderQty("0.008").cum("0.004").leaves("0").avgPx("100")
                .orderId(orderA));
        live.remove(c4);
        ok("TRADER1 cancel -> Canceled, CumQty 0.004, LeavesQty 0");
    }

    private void step6UnknownOrder() throws Exception {
        String unknown = runId + "-nosuch";
        String c6 = nextClOrdId();
        send(trader1, cancel(c6, unknown, '1', "0.001"));
        expectCancelReject(trader1, c6, unknown, '1');
        String c6b = nextClOrdId();
        send(trader1, replace(c6b, unknown, '1', "0.001", "100.00"));
        expectCancelReject(trader1, c6b, unknown, '2');
        ok("cancel and replace of an unknown OrigClOrdID -> OrderCancelReject CxlRejReason 1");
    }

    private void step7OffGridPrice() throws Exception {
        String c7 = nextClOrdId();
        send(trader1, newOrder(c7, '1', "0.001", "100.005", '1'));
        Message er = expectEr(trader1, er("Rejected").execType('8').ordStatus('8').clOrdId(c7)
                .side('1').orderQty("0.001").cum("0").leaves("0").avgPx("0"));
        String text = Fix.get(er, 58);
        ok("price 100.005 off the 0.01 grid -> Rejected (OrdRejReason " + Fix.get(er, 103)
                + (text == null ? "" : ", Text '" + text + "'") + ")");
    }

    private void step8DuplicateClOrdId() throws Exception {
        String c8 = nextClOrdId();
        send(trader1, newOrder(c8, '1', "0.002", "90.00", '1'));
        Message er = expectEr(trader1, er("New").execType('0').ordStatus('0').clOrdId(c8)
                .side('1').orderQty("0.002").cum("0").leaves("0.002").avgPx("0"));
        String orderId = Fix.get(er, 37);
        live.put(c8, new LiveOrder(trader1, '1', "0.002"));
        send(trader1, newOrder(c8, '1', "0.001", "90.00", '1'));
        expectEr(trader1, er("Rejected").execType('8').ordStatus('8').clOrdId(c8).side('1')
                .cum("0").leaves("0").avgPx("0").ordRejReason("6"));
        String c8c = nextClOrdId();
        send(trader1, cancel(c8c, c8, '1', "0.002"));
        // The first order must be untouched by the rejected duplicate.
        expectEr(trader1, er("Canceled").execType('4').ordStatus('4').clOrdId(c8c).origClOrdId(c8)
                .side('1').orderQty("0.002").cum("0").leaves("0").avgPx("0").orderId(orderId));
        live.remove(c8);
        ok("NewOrderSingle reusing a live ClOrdID -> Rejected OrdRejReason 6; the live order"
                + " then cancels with LeavesQty 0.002 untouched");
    }

    private void step9GapFromClient() throws Exception {
        Session session = trader1.session();
        int next = session.getExpectedSenderNum();
        int adminMark = trader1.adminLog.size();
        session.setNextSenderMsgSeqNum(next + 5);
        String c9 = nextClOrdId();
        send(trader1, newOrder(c9, '1', "0.001", "90.00", '1'));
        Message er = expectEr(trader1, er("New").execType('0').ordStatus('0').clOrdId(c9)
                .side('1').orderQty("0.001").cum("0").leaves("0.001").avgPx("0"));
        String orderId = Fix.get(er, 37);
        live.put(c9, new LiveOrder(trader1, '1', "0.001"));
        Event resendRequest = expectAdmin(trader1, adminMark, true, "2",
                m -> String.valueOf(next).equals(Fix.get(m, 7)),
                "a ResendRequest(2) from the acceptor with BeginSeqNo=" + next);
        Event gapFill = expectAdmin(trader1, adminMark, false, "4",
                m -> "Y".equals(Fix.get(m, 123))
                        && String.valueOf(next).equals(Fix.get(m.getHeader(), 34))
                        && String.valueOf(next + 5).equals(Fix.get(m, 36)),
                "QuickFIX/J's SequenceReset-GapFill(4) MsgSeqNum=" + next + " NewSeqNo=" + (next + 5));
        expectQuiet(trader1, "no second reply to the order (it may be resent with PossDupFlag=Y)");
        String c9c = nextClOrdId();
        send(trader1, cancel(c9c, c9, '1', "0.001"));
        expectEr(trader1, er("Canceled").execType('4').ordStatus('4').clOrdId(c9c).origClOrdId(c9)
                .side('1').orderQty("0.001").cum("0").leaves("0").avgPx("0").orderId(orderId));
        live.remove(c9);
        ok("client seq jumped " + next + " -> " + (next + 5) + ": acceptor sent ResendRequest "
                + Fix.get(resendRequest.msg, 7) + ".." + Fix.get(resendRequest.msg, 16)
                + ", QuickFIX/J gap-filled to " + Fix.get(gapFill.msg, 36)
                + ", order processed once (New), then canceled");
    }

    private void step10ResendFromAcceptor() throws Exception {
        String c10 = nextClOrdId();
        send(trader1, newOrder(c10, '1', "0.005", "100.00", '1'));
        Message er = expectEr(trader1, er("New").execType('0').ordStatus('0').clOrdId(c10)
                .side('1').orderQty("0.005").cum("0").leaves("0.005").avgPx("0"));
        String orderId = Fix.get(er, 37);
        live.put(c10, new LiveOrder(trader1, '1', "0.005"));

        logout(trader1, "step 10: away while the order fills");

        String c10s = nextClOrdId();
        send(trader2, newOrder(c10s, '2', "0.005", "100.00", '1'));
        er = expectEr(trader2, er("New").execType('0').ordStatus('0').clOrdId(c10s).side('2')
                .orderQty("0.005").cum("0").leaves("0.005").avgPx("0"));
        String sellOrderId = Fix.get(er, 37);
        expectEr(trader2, er("Trade").execType('F').ordStatus('2').clOrdId(c10s).side('2')
                .orderQty("0.005").last("100", "0.005").cum("0.005").leaves("0").avgPx("100")
                .orderId(sellOrderId));
        live.remove(c10);
        // TRADER2's fill came back, so TRADER1's side of the trade exists at the acceptor; give
        // it a moment to reach TRADER1's store before TRADER1 comes back.
        Thread.sleep(200);

        int adminMark = trader1.adminLog.size();
        trader1.loggingOut = false;
        trader1.session().logon();
        if (!waitUntil(trader1::loggedOn, stepTimeoutMs)) {
            throw new Failure("expected TRADER1 to log on again within " + stepTimeoutMs + " ms");
        }
        expectEr(trader1, er("Trade resent").execType('F').ordStatus('2').clOrdId(c10).side('1')
                .orderQty("0.005").last("100", "0.005").cum("0.005").leaves("0").avgPx("100")
                .orderId(orderId).possDup());
        Event resendRequest = expectAdmin(trader1, adminMark, false, "2", m -> true,
                "QuickFIX/J's ResendRequest(2) after the acceptor's Logon showed a gap");
        expectQuiet(trader1, "no second copy of the trade");
        ok("TRADER1 logged out, its order filled, logged on again: QuickFIX/J sent ResendRequest "
                + Fix.get(resendRequest.msg, 7) + ".." + Fix.get(resendRequest.msg, 16)
                + ", got the Trade with PossDupFlag=Y");
    }

    /**
     * The test runs this through a proxy that drops, once per connection, the first
     * NewOrderSingle whose ClOrdID ends in "-lost" (towards the acceptor) and the first
     * ExecutionReport for it (towards QuickFIX/J). Both sides see a gap, ask for it, and
     * recover without a sequence reset: the acceptor keeps the order that arrived above its gap
     * and processes it after the resent one; QuickFIX/J does the same with the reports.
     */
    private void step11MessagesLostOnTheWire() throws Exception {
        Session session = trader1.session();
        int adminMark = trader1.adminLog.size();
        int lostSeq = session.getExpectedSenderNum();
        String lost = nextClOrdId() + "-lost";
        String next = nextClOrdId();
        send(trader1, newOrder(lost, '1', "0.001", "80.00", '1'));
        send(trader1, newOrder(next, '1', "0.001", "81.00", '1'));
        // Just the gap: the next order, held above it, is not asked for again.
        Event resendRequest = expectAdmin(trader1, adminMark, true, "2",
                m -> String.valueOf(lostSeq).equals(Fix.get(m, 7))
                        && String.valueOf(lostSeq).equals(Fix.get(m, 16)),
                "a ResendRequest(2) from the acceptor for " + lostSeq + ".." + lostSeq
                        + " (the lost order's MsgSeqNum only)");
        // The lost order first (resent), then the one that waited above the gap; QuickFIX/J
        // gets the lost order's report by its own ResendRequest, before the next one's.
        Message erLost = expectEr(trader1, er("New").execType('0').ordStatus('0').clOrdId(lost)
                .side('1').orderQty("0.001").cum("0").leaves("0.001").avgPx("0").possDup());
        Message erNext = expectEr(trader1, er("New").execType('0').ordStatus('0').clOrdId(next)
                .side('1').orderQty("0.001").cum("0").leaves("0.001").avgPx("0"));
        Event ourRequest = expectAdmin(trader1, adminMark, false, "2", m -> true,
                "QuickFIX/J's ResendRequest(2) for the lost ExecutionReport");
        expectQuiet(trader1, "no second report for either order (resent copies are duplicates)");
        for (Event e : trader1.adminLog.subList(adminMark, trader1.adminLog.size())) {
            // Messages QuickFIX/J resends (PossDupFlag=Y) are in the admin log too.
            if (!e.incoming && e.msgType.equals("D") && next.equals(Fix.get(e.msg, 11))) {
                throw new Failure("expected the order queued above the gap to be processed, not"
                        + " asked for again, got its resend " + Fix.readable(e.msg));
            }
            boolean reset = e.msgType.equals("4") && !"Y".equals(Fix.get(e.msg, 123));
            if (reset || e.msgType.equals("A")) {
                throw new Failure("expected recovery without a sequence reset or a new Logon, got "
                        + (e.incoming ? "in " : "out ") + Fix.readable(e.msg));
            }
        }
        for (var order : List.of(List.of(lost, Fix.get(erLost, 37)), List.of(next, Fix.get(erNext, 37)))) {
            String cancelId = nextClOrdId();
            send(trader1, cancel(cancelId, order.get(0), '1', "0.001"));
            expectEr(trader1, er("Canceled").execType('4').ordStatus('4').clOrdId(cancelId)
                    .origClOrdId(order.get(0)).side('1').orderQty("0.001").cum("0").leaves("0")
                    .avgPx("0").orderId(order.get(1)));
        }
        ok("an order and its report lost on the wire: the acceptor asked for "
                + Fix.get(resendRequest.msg, 7) + ".." + Fix.get(resendRequest.msg, 16)
                + " and processed the resent order, then the one queued above the gap;"
                + " QuickFIX/J asked for " + Fix.get(ourRequest.msg, 7) + ".."
                + Fix.get(ourRequest.msg, 16) + "; both reports in order, no sequence reset");
    }

    /** ExecType of a triggered stop: L came with FIX 5.0; FIX 4.4 reports it Restated (D). */
    private char triggeredExecType() {
        return begin.equals(Fix.FIX44) ? 'D' : 'L';
    }

    /** Where the version's NewOrderSingle and ExecutionReport carry an iceberg's shown quantity. */
    private int shownQtyTag() {
        return begin.equals(Fix.FIX44) ? 111 : 1138;
    }

    /**
     * The price of step 13's iceberg, which this run leaves resting for the Rust test to check
     * the book: lower on the second run (FIXT.1.1), so that its buyer does not reach the first
     * run's iceberg.
     */
    private String icebergPrice() {
        return begin.equals(Fix.FIX44) ? "130.00" : "120.00";
    }

    private void step12StopTriggeredByATrade() throws Exception {
        // Steps 2 and 10 traded at 100.00: a buy stop at 110.00 waits for a trade up there.
        String stopId = nextClOrdId();
        Message stop = order(stopId, '1', "0.001", '4', "111.00", '1');
        stop.setString(99, "110.00");
        send(trader1, stop);
        Message er = expectEr(trader1, er("New stop limit").execType('0').ordStatus('0')
                .clOrdId(stopId).side('1').orderQty("0.001").cum("0").leaves("0.001").avgPx("0")
                .price("111.00").field(40, "4").field(59, "1").decimalField(99, "110.00"));
        String stopOrderId = Fix.get(er, 37);
        live.put(stopId, new LiveOrder(trader1, '1', "0.001"));
        String sellId = nextClOrdId();
        send(trader2, newOrder(sellId, '2', "0.002", "110.00", '1'));
        er = expectEr(trader2, er("New").execType('0').ordStatus('0').clOrdId(sellId).side('2')
                .orderQty("0.002").cum("0").leaves("0.002").avgPx("0"));
        String sellOrderId = Fix.get(er, 37);
        live.put(sellId, new LiveOrder(trader2, '2', "0.002"));
        // A trade at 110.00 triggers the stop, which then buys the rest of the sell order.
        String buyId = nextClOrdId();
        send(trader1, newOrder(buyId, '1', "0.001", "110.00", '1'));
        expectEr(trader1, er("New").execType('0').ordStatus('0').clOrdId(buyId).side('1')
                .orderQty("0.001").cum("0").leaves("0.001").avgPx("0"));
        expectEr(trader1, er("Trade").execType('F').ordStatus('2').clOrdId(buyId).side('1')
                .orderQty("0.001").last("110", "0.001").cum("0.001").leaves("0").avgPx("110"));
        Er triggered = er("Triggered").execType(triggeredExecType()).ordStatus('0')
                .clOrdId(stopId).side('1').orderQty("0.001").cum("0").leaves("0.001")
                .avgPx("0").orderId(stopOrderId).field(40, "4").decimalField(99, "110.00");
        if (begin.equals(Fix.FIX44)) {
            triggered.field(378, "8"); // ExecRestatementReason: market (exchange) option
        } else {
            triggered.absent(378);
        }
        expectEr(trader1, triggered);
        expectEr(trader1, er("Trade of the triggered stop").execType('F').ordStatus('2')
                .clOrdId(stopId).side('1').orderQty("0.001").last("110", "0.001").cum("0.001")
                .leaves("0").avgPx("110").orderId(stopOrderId).field(40, "4")
                .decimalField(99, "110.00"));
        live.remove(stopId);
        expectEr(trader2, er("Trade").execType('F').ordStatus('1').clOrdId(sellId).side('2')
                .orderQty("0.002").last("110", "0.001").cum("0.001").leaves("0.001")
                .avgPx("110").orderId(sellOrderId));
        expectEr(trader2, er("Trade").execType('F').ordStatus('2').clOrdId(sellId).side('2')
                .orderQty("0.002").last("110", "0.001").cum("0.002").leaves("0").avgPx("110")
                .orderId(sellOrderId));
        live.remove(sellId);
        ok("TRADER1 stop limit buy StopPx 110.00: New; a trade at 110.00 -> ExecType "
                + triggeredExecType() + (begin.equals(Fix.FIX44) ? " ExecRestatementReason 8" : "")
                + ", then its fill at 110; StopPx and OrdType 4 on every report");
    }

    private void step13IcebergFilledAcrossRefills() throws Exception {
        String price = icebergPrice();
        int shownTag = shownQtyTag();
        String iceId = nextClOrdId();
        Message ice = order(iceId, '2', "0.005", '2', price, '1');
        ice.setString(shownTag, "0.002");
        send(trader2, ice);
        Message er = expectEr(trader2, er("New iceberg").execType('0').ordStatus('0')
                .clOrdId(iceId).side('2').orderQty("0.005").cum("0").leaves("0.005").avgPx("0")
                .decimalField(shownTag, "0.002"));
        String iceOrderId = Fix.get(er, 37);
        live.put(iceId, new LiveOrder(trader2, '2', "0.005"));
        String buyId = nextClOrdId();
        send(trader1, newOrder(buyId, '1', "0.003", price, '3'));
        expectEr(trader1, er("New").execType('0').ordStatus('0').clOrdId(buyId).side('1')
                .orderQty("0.003").cum("0").leaves("0.003").avgPx("0"));
        // The taker meets the shown 0.002, then the refilled slice: two fills.
        expectEr(trader1, er("Trade of the shown slice").execType('F').ordStatus('1')
                .clOrdId(buyId).side('1').orderQty("0.003").last(price, "0.002").cum("0.002")
                .leaves("0.001").avgPx(price));
        expectEr(trader1, er("Trade of the refill").execType('F').ordStatus('2').clOrdId(buyId)
                .side('1').orderQty("0.003").last(price, "0.001").cum("0.003").leaves("0")
                .avgPx(price));
        expectEr(trader2, er("Trade").execType('F').ordStatus('1').clOrdId(iceId).side('2')
                .orderQty("0.005").last(price, "0.002").cum("0.002").leaves("0.003")
                .avgPx(price).orderId(iceOrderId).decimalField(shownTag, "0.002"));
        expectEr(trader2, er("Trade").execType('F').ordStatus('1').clOrdId(iceId).side('2')
                .orderQty("0.005").last(price, "0.001").cum("0.003").leaves("0.002")
                .avgPx(price).orderId(iceOrderId).decimalField(shownTag, "0.002"));
        ok("TRADER2 iceberg sell 0.005 @ " + price + " showing 0.002 (" + Fix.tagName(shownTag)
                + "); TRADER1 IOC buy 0.003 filled 0.002 + 0.001 across the refill; the iceberg"
                + " rests with 0.002, showing 0.001, OrderID " + iceOrderId);
    }

    private void step14GtdExpires() throws Exception {
        LocalDateTime expire = LocalDateTime.now(ZoneOffset.UTC).plusSeconds(2)
                .truncatedTo(ChronoUnit.MILLIS);
        String gtdId = nextClOrdId();
        Message gtd = order(gtdId, '1', "0.001", '2', "90.00", '6');
        gtd.setField(new ExpireTime(expire));
        send(trader1, gtd);
        Message er = expectEr(trader1, er("New GTD").execType('0').ordStatus('0').clOrdId(gtdId)
                .side('1').orderQty("0.001").cum("0").leaves("0.001").avgPx("0").field(59, "6")
                .timestamp(126, expire));
        String orderId = Fix.get(er, 37);
        live.put(gtdId, new LiveOrder(trader1, '1', "0.001"));
        expectEr(trader1, er("Expired").execType('C').ordStatus('C').clOrdId(gtdId).side('1')
                .orderQty("0.001").cum("0").leaves("0").avgPx("0").orderId(orderId)
                .field(59, "6").timestamp(126, expire));
        live.remove(gtdId);
        ok("TRADER1 GTD buy, ExpireTime in 2 s: New, then Expired (ExecType C, OrdStatus C) by"
                + " itself; TimeInForce 6 and ExpireTime on both");
    }

    private void step15ReplaceOfAStopLimitGtd() throws Exception {
        LocalDateTime expire = LocalDateTime.now(ZoneOffset.UTC).plusHours(1)
                .truncatedTo(ChronoUnit.MILLIS);
        String first = nextClOrdId();
        Message stop = order(first, '2', "0.002", '4', "49.00", '6');
        stop.setString(99, "50.00");
        stop.setField(new ExpireTime(expire));
        send(trader1, stop);
        Message er = expectEr(trader1, er("New stop limit GTD").execType('0').ordStatus('0')
                .clOrdId(first).side('2').orderQty("0.002").cum("0").leaves("0.002").avgPx("0")
                .price("49.00").field(40, "4").decimalField(99, "50.00").field(59, "6")
                .timestamp(126, expire));
        String orderId = Fix.get(er, 37);
        live.put(first, new LiveOrder(trader1, '2', "0.002"));
        String second = nextClOrdId();
        Message replace = replace(second, first, '2', "0.003", "48.00");
        replace.setChar(40, '4');
        replace.setString(99, "50.00");
        replace.setChar(59, '6');
        replace.setField(new ExpireTime(expire));
        send(trader1, replace);
        expectEr(trader1, er("Replaced").execType('5').ordStatus('0').clOrdId(second)
                .origClOrdId(first).side('2').orderQty("0.003").cum("0").leaves("0.003")
                .avgPx("0").price("48.00").orderId(orderId).field(40, "4")
                .decimalField(99, "50.00").field(59, "6").timestamp(126, expire));
        rename(first, second, "0.003");
        expectQuiet(trader1, "no other report: the replace is one order, not a cancel and a new");
        String cancelId = nextClOrdId();
        send(trader1, cancel(cancelId, second, '2', "0.003"));
        expectEr(trader1, er("Canceled").execType('4').ordStatus('4').clOrdId(cancelId)
                .origClOrdId(second).side('2').orderQty("0.003").cum("0").leaves("0").avgPx("0")
                .orderId(orderId).field(40, "4").decimalField(99, "50.00").field(59, "6")
                .timestamp(126, expire));
        live.remove(second);
        ok("TRADER1 stop limit GTD sell replaced 0.002 @ 49.00 -> 0.003 @ 48.00: Replaced"
                + " (ExecType 5), same OrderID " + orderId + ", nothing else; then canceled;"
                + " OrdType, StopPx, TimeInForce and ExpireTime on every report");
    }

    private void logoutStep() throws Failure {
        begin(16);
        for (Trader t : List.of(trader1, trader2)) {
            logout(t, "interop test done");
        }
        ok("TRADER1 and TRADER2 logged out");
    }

    // ---------------------------------------------------------------------------------------
    // Sending

    private Message newOrder(String clOrdId, char side, String qty, String price, char tif) {
        Message m = new Message();
        m.getHeader().setString(35, "D");
        m.setString(11, clOrdId);
        m.setString(55, Fix.SYMBOL);
        m.setChar(54, side);
        m.setField(new TransactTime(LocalDateTime.now(ZoneOffset.UTC)));
        m.setString(38, qty);
        m.setChar(40, '2');
        m.setString(44, price);
        m.setChar(59, tif);
        return m;
    }

    /** A NewOrderSingle of any OrdType and TimeInForce; the caller adds StopPx and the like. */
    private Message order(String clOrdId, char side, String qty, char ordType, String price,
            char tif) {
        Message m = newOrder(clOrdId, side, qty, price, tif);
        m.setChar(40, ordType);
        return m;
    }

    private Message cancel(String clOrdId, String origClOrdId, char side, String qty) {
        Message m = new Message();
        m.getHeader().setString(35, "F");
        m.setString(41, origClOrdId);
        m.setString(11, clOrdId);
        m.setString(55, Fix.SYMBOL);
        m.setChar(54, side);
        m.setField(new TransactTime(LocalDateTime.now(ZoneOffset.UTC)));
        m.setString(38, qty);
        return m;
    }

    private Message replace(String clOrdId, String origClOrdId, char side, String qty,
            String price) {
        Message m = new Message();
        m.getHeader().setString(35, "G");
        m.setString(41, origClOrdId);
        m.setString(11, clOrdId);
        m.setString(55, Fix.SYMBOL);
        m.setChar(54, side);
        m.setField(new TransactTime(LocalDateTime.now(ZoneOffset.UTC)));
        m.setString(38, qty);
        m.setChar(40, '2');
        m.setString(44, price);
        m.setChar(59, '1');
        return m;
    }

    private void send(Trader t, Message m) throws Failure {
        Session s = t.session();
        if (s == null || !s.isLoggedOn() || !s.send(m)) {
            throw new Failure("could not send " + Fix.readable(m) + " on " + t.name
                    + " (logged on: " + (s != null && s.isLoggedOn()) + ")");
        }
    }

    private void rename(String oldClOrdId, String newClOrdId, String qty) {
        LiveOrder o = live.remove(oldClOrdId);
        if (o != null) {
            live.put(newClOrdId, new LiveOrder(o.trader, o.side, qty));
        }
    }

    private void logout(Trader t, String why) throws Failure {
        t.loggingOut = true;
        Session s = t.session();
        if (s != null && s.isLoggedOn()) {
            s.logout(why);
        }
        if (!waitUntil(() -> !t.loggedOn(), stepTimeoutMs)) {
            throw new Failure("expected " + t.name + " logged out within " + stepTimeoutMs
                    + " ms of sending Logout");
        }
    }

    // ---------------------------------------------------------------------------------------
    // Waiting and checking

    private static boolean waitUntil(BooleanSupplier condition, long timeoutMs) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    /** The next message a step waits on, which must be of this type. */
    private Message expect(Trader t, String msgType, String what) throws Failure {
        Event e;
        try {
            e = t.inbox.poll(stepTimeoutMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException ie) {
            throw new Failure("interrupted waiting for " + what);
        }
        if (e == null) {
            throw new Failure("expected " + what + " on " + t.name + ", nothing came within "
                    + stepTimeoutMs + " ms");
        }
        if (!e.incoming || !e.msgType.equals(msgType)) {
            throw new Failure("expected " + what + " on " + t.name + ", got " + describe(t, e));
        }
        return e.msg;
    }

    /** Nothing more may arrive on this session for a short while. */
    private void expectQuiet(Trader t, String what) throws Failure {
        Event e;
        try {
            e = t.inbox.poll(QUIET_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException ie) {
            throw new Failure("interrupted");
        }
        if (e != null) {
            throw new Failure("expected " + what + " on " + t.name + ", got " + describe(t, e));
        }
    }

    /** An admin message seen after a mark in the session's admin log, waiting for it a while. */
    private Event expectAdmin(Trader t, int mark, boolean incoming, String msgType,
            Predicate<Message> matches, String what) throws Failure {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(stepTimeoutMs);
        while (true) {
            List<Event> log = t.adminLog;
            for (int i = mark; i < log.size(); i++) {
                Event e = log.get(i);
                if (e.incoming == incoming && e.msgType.equals(msgType) && matches.test(e.msg)) {
                    return e;
                }
            }
            if (System.nanoTime() - deadline > 0) {
                StringBuilder seen = new StringBuilder();
                for (int i = mark; i < log.size(); i++) {
                    Event e = log.get(i);
                    seen.append(seen.length() == 0 ? "" : "; ").append(e.incoming ? "in " : "out ")
                            .append(Fix.readable(e.msg));
                }
                throw new Failure("expected " + what + " on " + t.name + ", admin messages seen: "
                        + (seen.length() == 0 ? "none" : seen));
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException ie) {
                throw new Failure("interrupted");
            }
        }
    }

    private String describe(Trader t, Event e) {
        String type = e.msgType;
        if (!e.incoming && type.equals("3")) {
            String refSeq = Fix.get(e.msg, 45);
            String raw = refSeq == null ? null : t.recent.incomingWithSeq(refSeq);
            return "QuickFIX/J REJECTED the acceptor's message (seq " + refSeq + "): "
                    + "SessionRejectReason=" + Fix.get(e.msg, 373) + " RefTagID="
                    + Fix.get(e.msg, 371) + " Text='" + Fix.get(e.msg, 58) + "'"
                    + (raw == null ? "" : "; the rejected message: " + raw);
        }
        if (!e.incoming && type.equals("5")) {
            return "QuickFIX/J logged out: Text='" + Fix.get(e.msg, 58) + "'";
        }
        if (type.equals("3")) {
            return "Reject(3) from the acceptor: SessionRejectReason=" + Fix.get(e.msg, 373)
                    + " RefTagID=" + Fix.get(e.msg, 371) + " Text='" + Fix.get(e.msg, 58) + "' "
                    + Fix.readable(e.msg);
        }
        if (type.equals("5")) {
            return "Logout(5) from the acceptor: Text='" + Fix.get(e.msg, 58) + "'";
        }
        return describeMessage(e.msg);
    }

    private static String describeMessage(Message m) {
        String type = Fix.msgType(m);
        String name = switch (type) {
            case "8" -> "ExecutionReport ExecType=" + Fix.get(m, 150) + " OrdStatus=" + Fix.get(m, 39);
            case "9" -> "OrderCancelReject";
            case "j" -> "BusinessMessageReject Text='" + Fix.get(m, 58) + "'";
            default -> "MsgType " + type;
        };
        return name + ": " + Fix.readable(m);
    }

    private Message expectEr(Trader t, Er spec) throws Failure {
        Message m = expect(t, "8", spec.describe());
        List<String> problems = spec.check(m);
        String execId = Fix.get(m, 17);
        if (execId != null && !execIdsSeen.add(execId) && !spec.possDup) {
            problems.add("ExecID(17)=" + execId + " was already used by an earlier report");
        }
        if (!problems.isEmpty()) {
            throw new Failure("expected " + spec.describe() + " on " + t.name + ", got "
                    + String.join(", ", problems) + "; message: " + Fix.readable(m));
        }
        return m;
    }

    private void expectCancelReject(Trader t, String clOrdId, String origClOrdId,
            char responseTo) throws Failure {
        String what = "OrderCancelReject(9) ClOrdID=" + clOrdId + " OrigClOrdID=" + origClOrdId
                + " CxlRejResponseTo=" + responseTo + " CxlRejReason=1";
        Message m = expect(t, "9", what);
        List<String> problems = new ArrayList<>();
        Er.exact(m, 11, clOrdId, problems);
        Er.exact(m, 41, origClOrdId, problems);
        Er.exact(m, 434, String.valueOf(responseTo), problems);
        Er.exact(m, 102, "1", problems);
        if (Fix.get(m, 37) == null || Fix.get(m, 39) == null) {
            problems.add("OrderID(37) and OrdStatus(39) are required");
        }
        if (!problems.isEmpty()) {
            throw new Failure("expected " + what + " on " + t.name + ", got "
                    + String.join(", ", problems) + "; message: " + Fix.readable(m));
        }
    }

    private static Er er(String kind) {
        return new Er(kind);
    }

    /** What one ExecutionReport must say. Decimals compare by value (100 == 100.00). */
    static final class Er {
        private final String kind;
        private final Map<Integer, String> exact = new LinkedHashMap<>();
        private final Map<Integer, String> decimals = new LinkedHashMap<>();
        private final Map<Integer, LocalDateTime> timestamps = new LinkedHashMap<>();
        private final Set<Integer> absent = new TreeSet<>();
        private String priceIfPresent;
        private String orderId;
        private boolean trade;
        boolean possDup;

        Er(String kind) {
            this.kind = kind;
            exact.put(55, Fix.SYMBOL);
        }

        Er execType(char c) {
            exact.put(150, String.valueOf(c));
            trade = c == 'F';
            return this;
        }

        Er ordStatus(char c) {
            exact.put(39, String.valueOf(c));
            return this;
        }

        Er clOrdId(String s) {
            exact.put(11, s);
            return this;
        }

        Er origClOrdId(String s) {
            exact.put(41, s);
            return this;
        }

        Er side(char c) {
            exact.put(54, String.valueOf(c));
            return this;
        }

        Er ordRejReason(String s) {
            exact.put(103, s);
            return this;
        }

        Er orderQty(String d) {
            decimals.put(38, d);
            return this;
        }

        Er cum(String d) {
            decimals.put(14, d);
            return this;
        }

        Er leaves(String d) {
            decimals.put(151, d);
            return this;
        }

        Er avgPx(String d) {
            decimals.put(6, d);
            return this;
        }

        Er last(String px, String qty) {
            decimals.put(31, px);
            decimals.put(32, qty);
            return this;
        }

        /** Price(44) need not be echoed, but if it is it must be the order's. */
        Er price(String d) {
            priceIfPresent = d;
            return this;
        }

        Er orderId(String id) {
            orderId = id;
            return this;
        }

        /** Any other field that must be exactly this. */
        Er field(int tag, String value) {
            exact.put(tag, value);
            return this;
        }

        /** Any other decimal field, compared by value. */
        Er decimalField(int tag, String value) {
            decimals.put(tag, value);
            return this;
        }

        /** A UTCTimestamp field that must be this instant. */
        Er timestamp(int tag, LocalDateTime value) {
            timestamps.put(tag, value);
            return this;
        }

        /** A field the report must not have. */
        Er absent(int tag) {
            absent.add(tag);
            return this;
        }

        Er possDup() {
            possDup = true;
            return this;
        }

        String describe() {
            return "ExecutionReport " + kind + " (ExecType=" + exact.get(150) + " OrdStatus="
                    + exact.get(39) + ") ClOrdID=" + exact.get(11)
                    + (decimals.isEmpty() ? "" : " " + decimalsText());
        }

        private String decimalsText() {
            StringBuilder b = new StringBuilder();
            decimals.forEach((tag, v) -> b.append(b.length() == 0 ? "" : " ")
                    .append(Fix.tagName(tag).replaceAll("\\(.*", "")).append('=').append(v));
            return b.toString();
        }

        List<String> check(Message m) {
            List<String> problems = new ArrayList<>();
            exact.forEach((tag, want) -> exact(m, tag, want, problems));
            decimals.forEach((tag, want) -> decimal(m, tag, want, problems));
            timestamps.forEach((tag, want) -> {
                String got = Fix.get(m, tag);
                try {
                    if (got == null) {
                        problems.add(Fix.tagName(tag) + " missing, expected " + want);
                    } else if (!UtcTimestampConverter.convertToLocalDateTime(got).equals(want)) {
                        problems.add(Fix.tagName(tag) + "=" + got + ", expected " + want);
                    }
                } catch (quickfix.FieldConvertError e) {
                    problems.add(Fix.tagName(tag) + "=" + got + " is not a UTCTimestamp");
                }
            });
            for (int tag : absent) {
                if (Fix.get(m, tag) != null) {
                    problems.add(Fix.tagName(tag) + "=" + Fix.get(m, tag) + ", expected none");
                }
            }
            if (priceIfPresent != null && m.isSetField(44)) {
                decimal(m, 44, priceIfPresent, problems);
            }
            if (!trade) {
                // LastPx/LastQty belong to fills; anywhere else they may only be zero.
                for (int tag : new int[] {31, 32}) {
                    String v = Fix.get(m, tag);
                    if (v != null && !isZero(v)) {
                        problems.add(Fix.tagName(tag) + "=" + v + " on a report that is no fill");
                    }
                }
            }
            String id = Fix.get(m, 37);
            if (id == null || id.isEmpty()) {
                problems.add("OrderID(37) missing");
            } else if (orderId != null && !orderId.equals(id)) {
                problems.add("OrderID(37)=" + id + ", expected the order's " + orderId);
            }
            String execId = Fix.get(m, 17);
            if (execId == null || execId.isEmpty()) {
                problems.add("ExecID(17) missing");
            }
            String dup = Fix.get(m.getHeader(), 43);
            if (possDup && !"Y".equals(dup)) {
                problems.add("PossDupFlag(43)=" + dup + ", expected Y on a resent report");
            } else if (!possDup && "Y".equals(dup)) {
                problems.add("PossDupFlag(43)=Y on a report that was not resent");
            }
            return problems;
        }

        static void exact(Message m, int tag, String want, List<String> problems) {
            String got = Fix.get(m, tag);
            if (got == null) {
                problems.add(Fix.tagName(tag) + " missing, expected " + want);
            } else if (!got.equals(want)) {
                problems.add(Fix.tagName(tag) + "=" + got + ", expected " + want);
            }
        }

        static void decimal(Message m, int tag, String want, List<String> problems) {
            String got = Fix.get(m, tag);
            if (got == null) {
                problems.add(Fix.tagName(tag) + " missing, expected " + want);
                return;
            }
            try {
                if (new BigDecimal(got).compareTo(new BigDecimal(want)) != 0) {
                    problems.add(Fix.tagName(tag) + "=" + got + ", expected " + want);
                }
            } catch (NumberFormatException e) {
                problems.add(Fix.tagName(tag) + "=" + got + " is not a decimal");
            }
        }

        private static boolean isZero(String v) {
            try {
                return new BigDecimal(v).signum() == 0;
            } catch (NumberFormatException e) {
                return false;
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // On the way out

    private void dumpRecent() {
        for (Trader t : List.of(trader1, trader2)) {
            System.err.println("--- last messages and events of " + t.id + " ---");
            for (String line : t.recent.lines()) {
                System.err.println(line);
            }
        }
    }

    /** After a failure: cancel what this run left resting, log out, stop; all bounded. */
    private void cleanUp() {
        try {
            if (initiator == null) {
                return;
            }
            int sent = 0;
            for (Map.Entry<String, LiveOrder> e : live.entrySet()) {
                LiveOrder o = e.getValue();
                Session s = o.trader.session();
                if (s != null && s.isLoggedOn()) {
                    s.send(cancel(nextClOrdId(), e.getKey(), o.side, o.qty));
                    sent++;
                }
            }
            if (sent > 0) {
                System.err.println("clean-up: sent " + sent + " cancel(s) for orders left resting");
                Thread.sleep(500);
            }
            for (Trader t : List.of(trader1, trader2)) {
                t.loggingOut = true;
                Session s = t.session();
                if (s != null && s.isLoggedOn()) {
                    s.logout("interop test failed");
                }
            }
            waitUntil(() -> !trader1.loggedOn() && !trader2.loggedOn(), 3000);
            initiator.stop(true);
        } catch (Exception e) {
            System.err.println("clean-up: " + e);
        }
    }
}
