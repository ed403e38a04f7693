package rialto.interop;

import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import quickfix.Acceptor;
import quickfix.Application;
import quickfix.ConfigError;
import quickfix.DefaultMessageFactory;
import quickfix.Dictionary;
import quickfix.FieldNotFound;
import quickfix.FileStoreFactory;
import quickfix.MemoryStoreFactory;
import quickfix.Message;
import quickfix.MessageStoreFactory;
import quickfix.SLF4JLogFactory;
import quickfix.Session;
import quickfix.SessionID;
import quickfix.SessionNotFound;
import quickfix.SessionSettings;
import quickfix.SocketAcceptor;
import quickfix.ThreadedSocketAcceptor;
import quickfix.UnsupportedMessageType;
import quickfix.field.TransactTime;

/**
 * A QuickFIX/J acceptor doing the bookkeeping Rialto's FIX gateway does, without matching: the
 * baseline for side-by-side benchmarks of the gateway.
 *
 * <p>Per NewOrderSingle: ClOrdID unique among the session's live orders, price and quantity
 * converted exactly to ticks (0.01) and lots (0.001) with off-grid values rejected, an OrderID
 * assigned, the order kept in a map, and an ExecutionReport New sent with the fields Rialto
 * sends. OrderCancelRequest removes the order (Canceled); OrderCancelReplaceRequest changes the
 * price or lowers the quantity (Replaced). Credentials are not checked.
 *
 * <p>Store: a FileStore by default, as a production QuickFIX/J venue runs (every outgoing message
 * is written to the session's files; FileStoreSync=N, QuickFIX/J's default, unless
 * --file-store-sync). --memory-store keeps them in memory instead.
 */
public final class BaselineAcceptor implements Application {
    static final String USAGE = String.join("\n",
            "usage: java -cp 'target/classes:target/dependency/*' rialto.interop.BaselineAcceptor",
            "         --port P (--store DIR | --memory-store) [--begin FIX.4.4|FIXT.1.1|both]",
            "         [--file-store-sync] [--threaded] [--max-live-orders N]",
            "  Accepts TRADER1..TRADER8 -> RIALTO (FIX.4.4 and FIXT.1.1/FIX.5.0SP2 by default),",
            "  prints 'listening on P' once started, runs until killed.",
            "  --threaded          one thread per session (ThreadedSocketAcceptor) instead of one",
            "                      thread for all sessions (SocketAcceptor)",
            "  --max-live-orders   per session, default 1000000 (over it: OrdRejReason 3)");

    private final int maxLiveOrdersPerSession;
    private final AtomicLong lastOrderId = new AtomicLong();
    private final AtomicLong lastExecId = new AtomicLong();
    /** One book per session; each is touched only by the thread that serves that session. */
    private final Map<SessionID, Map<String, Order>> liveBySession = new ConcurrentHashMap<>();

    /** A live order as the gateway keeps it: exact integers, no decimals. */
    private record Order(String orderId, String clOrdId, char side, char ordType, char tif,
            long priceTicks, long qtyLots) {}

    private BaselineAcceptor(int maxLiveOrdersPerSession) {
        this.maxLiveOrdersPerSession = maxLiveOrdersPerSession;
    }

    public static void main(String[] argv) throws Exception {
        Args args = Args.parse(argv,
                Set.of("--port", "--store", "--begin", "--max-live-orders"),
                Set.of("--memory-store", "--file-store-sync", "--threaded"), USAGE);
        int port = args.integer("--port", 0, USAGE);
        if (port <= 0 || port > 65535) {
            Args.usageError(USAGE, "--port is required (1..65535)");
        }
        String storeDir = args.get("--store", null);
        if (args.flag("--memory-store") == (storeDir != null)) {
            Args.usageError(USAGE, "give exactly one of --store DIR and --memory-store");
        }
        String begin = args.get("--begin", "both");
        List<String> begins = switch (begin) {
            case "both" -> List.of(Fix.FIX44, Fix.FIXT11);
            case Fix.FIX44, Fix.FIXT11 -> List.of(begin);
            default -> {
                Args.usageError(USAGE, "--begin must be FIX.4.4, FIXT.1.1 or both");
                yield List.of();
            }
        };
        int maxLive = args.integer("--max-live-orders", 1_000_000, USAGE);

        SessionSettings settings = settings(port, storeDir, args.flag("--file-store-sync"), begins);
        MessageStoreFactory stores = storeDir != null
                ? new FileStoreFactory(settings) : new MemoryStoreFactory();
        BaselineAcceptor app = new BaselineAcceptor(maxLive);
        Acceptor acceptor = args.flag("--threaded")
                ? new ThreadedSocketAcceptor(app, stores, settings, new SLF4JLogFactory(settings),
                        new DefaultMessageFactory())
                : new SocketAcceptor(app, stores, settings, new SLF4JLogFactory(settings),
                        new DefaultMessageFactory());
        acceptor.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> acceptor.stop(true)));
        System.out.println("listening on " + port);
        System.out.flush();
        new CountDownLatch(1).await();
    }

    private static SessionSettings settings(int port, String storeDir, boolean sync,
            List<String> begins) throws ConfigError {
        SessionSettings s = new SessionSettings();
        s.setString("ConnectionType", "acceptor");
        s.setString("SocketAcceptAddress", "127.0.0.1");
        s.setLong("SocketAcceptPort", port);
        s.setString("SocketTcpNoDelay", "Y");
        s.setString("NonStopSession", "Y");
        s.setString("UseDataDictionary", "Y");
        s.setString("SLF4JLogHeartbeats", "N");
        if (storeDir != null) {
            s.setString("FileStorePath", storeDir);
            s.setString("FileStoreSync", sync ? "Y" : "N");
        }
        for (String begin : begins) {
            for (int user = 1; user <= Fix.MAX_USER; user++) {
                SessionID id = new SessionID(begin, Fix.ACCEPTOR_COMP_ID, Fix.clientCompId(user));
                Dictionary d = new Dictionary();
                d.setString(SessionSettings.BEGINSTRING, begin);
                d.setString(SessionSettings.SENDERCOMPID, id.getSenderCompID());
                d.setString(SessionSettings.TARGETCOMPID, id.getTargetCompID());
                if (begin.equals(Fix.FIXT11)) {
                    d.setString("TransportDataDictionary", "FIXT11.xml");
                    d.setString("AppDataDictionary", "FIX50SP2.xml");
                    d.setString("DefaultApplVerID", "FIX.5.0SP2");
                } else {
                    d.setString("DataDictionary", "FIX44.xml");
                }
                s.set(id, d);
            }
        }
        return s;
    }

    @Override
    public void onCreate(SessionID id) {
        liveBySession.put(id, new HashMap<>());
    }

    @Override
    public void onLogon(SessionID id) {}

    @Override
    public void onLogout(SessionID id) {}

    @Override
    public void toAdmin(Message m, SessionID id) {}

    @Override
    public void fromAdmin(Message m, SessionID id) {}

    @Override
    public void toApp(Message m, SessionID id) {}

    @Override
    public void fromApp(Message m, SessionID id) throws FieldNotFound, UnsupportedMessageType {
        Map<String, Order> live = liveBySession.get(id);
        Message reply = switch (Fix.msgType(m)) {
            case "D" -> newOrder(m, live);
            case "F" -> cancel(m, live);
            case "G" -> replace(m, live);
            default -> throw new UnsupportedMessageType();
        };
        try {
            Session.sendToTarget(reply, id);
        } catch (SessionNotFound e) {
            throw new IllegalStateException("a message came from session " + id
                    + " which does not exist", e);
        }
    }

    private Message newOrder(Message m, Map<String, Order> live) throws FieldNotFound {
        String clOrdId = m.getString(11);
        char side = m.getChar(54);
        char ordType = m.getChar(40);
        char tif = m.isSetField(59) ? m.getChar(59) : '0';
        if (live.containsKey(clOrdId)) {
            return rejected(m, 6, "ClOrdID is used by a live order");
        }
        if (!Fix.SYMBOL.equals(m.getString(55))) {
            return rejected(m, 1, "unknown symbol");
        }
        if (side != '1' && side != '2') {
            return rejected(m, 99, "side must be 1 or 2");
        }
        Long qtyLots = m.isSetField(38) ? Fix.toUnits(m.getString(38), Fix.QTY_SCALE) : null;
        if (qtyLots == null) {
            return rejected(m, 99, "OrderQty must be a positive multiple of 0.001");
        }
        long priceTicks = 0;
        if (ordType == '2') {
            Long ticks = m.isSetField(44) ? Fix.toUnits(m.getString(44), Fix.PRICE_SCALE) : null;
            if (ticks == null) {
                return rejected(m, 99, "Price must be a positive multiple of 0.01");
            }
            priceTicks = ticks;
        } else if (ordType != '1') {
            return rejected(m, 99, "OrdType must be 1 (market) or 2 (limit)");
        }
        if (live.size() >= maxLiveOrdersPerSession) {
            return rejected(m, 3, "too many live orders on this session");
        }
        Order order = new Order("O" + lastOrderId.incrementAndGet(), clOrdId, side, ordType, tif,
                priceTicks, qtyLots);
        live.put(clOrdId, order);
        Message er = report(order, '0', '0');
        er.setString(11, clOrdId);
        return er;
    }

    private Message cancel(Message m, Map<String, Order> live) throws FieldNotFound {
        String clOrdId = m.getString(11);
        String origClOrdId = m.getString(41);
        Order order = live.remove(origClOrdId);
        if (order == null) {
            return cancelReject(clOrdId, origClOrdId, '1', 1, "unknown order");
        }
        Message er = report(order, '4', '4');
        er.setString(11, clOrdId);
        er.setString(41, origClOrdId);
        er.setString(151, "0");
        return er;
    }

    private Message replace(Message m, Map<String, Order> live) throws FieldNotFound {
        String clOrdId = m.getString(11);
        String origClOrdId = m.getString(41);
        Order order = live.get(origClOrdId);
        if (order == null) {
            return cancelReject(clOrdId, origClOrdId, '2', 1, "unknown order");
        }
        if (live.containsKey(clOrdId)) {
            return cancelReject(clOrdId, origClOrdId, '2', 6, "ClOrdID is used by a live order");
        }
        Long qtyLots = m.isSetField(38) ? Fix.toUnits(m.getString(38), Fix.QTY_SCALE) : null;
        if (qtyLots == null || qtyLots > order.qtyLots) {
            return cancelReject(clOrdId, origClOrdId, '2', 99,
                    "OrderQty must be a positive multiple of 0.001, at most the order's");
        }
        long priceTicks = order.priceTicks;
        if (order.ordType == '2' && m.isSetField(44)) {
            Long ticks = Fix.toUnits(m.getString(44), Fix.PRICE_SCALE);
            if (ticks == null) {
                return cancelReject(clOrdId, origClOrdId, '2', 99,
                        "Price must be a positive multiple of 0.01");
            }
            priceTicks = ticks;
        }
        live.remove(origClOrdId);
        Order replaced = new Order(order.orderId, clOrdId, order.side, order.ordType, order.tif,
                priceTicks, qtyLots);
        live.put(clOrdId, replaced);
        Message er = report(replaced, '5', '0');
        er.setString(11, clOrdId);
        er.setString(41, origClOrdId);
        return er;
    }

    /** An ExecutionReport for a live order with no fills: the fields Rialto's gateway sends. */
    private Message report(Order order, char execType, char ordStatus) {
        Message er = new Message();
        er.getHeader().setString(35, "8");
        er.setString(37, order.orderId);
        er.setString(17, "E" + lastExecId.incrementAndGet());
        er.setChar(150, execType);
        er.setChar(39, ordStatus);
        er.setString(55, Fix.SYMBOL);
        er.setChar(54, order.side);
        er.setString(38, Fix.fromUnits(order.qtyLots, Fix.QTY_SCALE));
        er.setChar(40, order.ordType);
        if (order.ordType == '2') {
            er.setString(44, Fix.fromUnits(order.priceTicks, Fix.PRICE_SCALE));
        }
        er.setChar(59, order.tif);
        er.setString(14, "0");
        er.setString(151, Fix.fromUnits(order.qtyLots, Fix.QTY_SCALE));
        er.setString(6, "0");
        er.setField(new TransactTime(LocalDateTime.now(ZoneOffset.UTC)));
        return er;
    }

    private Message rejected(Message m, int ordRejReason, String text) throws FieldNotFound {
        Message er = new Message();
        er.getHeader().setString(35, "8");
        er.setString(37, "NONE");
        er.setString(17, "E" + lastExecId.incrementAndGet());
        er.setString(11, m.getString(11));
        er.setChar(150, '8');
        er.setChar(39, '8');
        er.setString(55, m.getString(55));
        er.setChar(54, m.getChar(54));
        if (m.isSetField(38)) {
            er.setString(38, m.getString(38));
        }
        er.setString(14, "0");
        er.setString(151, "0");
        er.setString(6, "0");
        er.setInt(103, ordRejReason);
        er.setString(58, text);
        er.setField(new TransactTime(LocalDateTime.now(ZoneOffset.UTC)));
        return er;
    }

    private static Message cancelReject(String clOrdId, String origClOrdId, char responseTo,
            int reason, String text) {
        Message r = new Message();
        r.getHeader().setString(35, "9");
        r.setString(37, "NONE");
        r.setString(11, clOrdId);
        r.setString(41, origClOrdId);
        r.setChar(39, '8');
        r.setChar(434, responseTo);
        r.setInt(102, reason);
        r.setString(58, text);
        return r;
    }
}
