// FlussBench: the Java side of scripts/bench-peers.sh (through scripts/peerbench/fluss.sh). It
// runs the workloads of internal/peerbench (the same rows from the same seeds) against a real
// Apache Fluss cluster with the Fluss Java client; `check` mode is a short functional check.
//
//   java -cp 'fluss-client.jar:log4j...:classes' FlussBench bench|check BOOTSTRAP
//   java -cp ... FlussBench rowhash      the hashes internal/peerbench's TestRowsMatchFlussBench holds
//
// Progress goes to stderr; the result is ONE JSON object on stdout (fluss.sh wraps it).
// Knobs come from the environment (see fluss.sh): N, KV_N, BUCKETS, ROW_BYTES, KV_STR_BYTES,
// UPDATE_RATIO, LOOKUP_INFLIGHT, WIDE_N, WIDE_BUCKETS, WIDE_ROW_BYTES, WIDE_LOOKUP_BATCH,
// CLIENT_PROPS, DB.
//
// Compiled by fluss.sh with javac against fluss-client (pom.xml's version); no other deps.

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.client.admin.OffsetSpec;
import org.apache.fluss.client.lookup.LookupResult;
import org.apache.fluss.client.lookup.Lookuper;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.ScanRecord;
import org.apache.fluss.client.table.scanner.log.LogScanner;
import org.apache.fluss.client.table.scanner.log.ScanRecords;
import org.apache.fluss.client.table.writer.AppendWriter;
import org.apache.fluss.client.table.writer.UpsertWriter;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.metadata.DatabaseDescriptor;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.BinaryString;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.types.DataType;
import org.apache.fluss.types.DataTypes;

import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

public final class FlussBench {
    private static final PrintStream ERR = System.err;

    // The vocabulary of Strom's genString (cli/bench.go `words`): text-like values that compress
    // the way real payloads do.
    private static final String[] WORDS = (
            "stream table bucket offset leader replica commit arrow column pruning "
                    + "changelog snapshot segment index watermark writer reader fetch produce schema partition lake tier "
                    + "remote merge engine lookup prefix scan upsert delete insert update coordinator tablet server node "
                    + "cluster metadata session watch epoch fence quorum batch record compress decompress zstd frame")
            .split(" ");

    private static final long GET_TIMEOUT_S = 120;

    /** The client configuration of main, for the connections a workload opens with other settings. */
    private static Configuration conf;

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("rowhash")) {
            System.out.println(rowHashes());
            return;
        }
        if (args.length != 2 || !(args[0].equals("bench") || args[0].equals("check"))) {
            ERR.println("usage: FlussBench bench|check BOOTSTRAP_HOST:PORT");
            System.exit(2);
        }
        conf = new Configuration();
        conf.setString("bootstrap.servers", args[1]);
        conf.setString("client.writer.acks", "all"); // Strom's benches use acks=-1
        // Read to the end without long polls, as Strom's consumeAll does (client.MaxWait(0)):
        // with the default 500 ms a fetch for a caught-up bucket holds back the next fetch of
        // the other buckets on that server (buffered buckets are left out of a fetch).
        conf.setString("client.scanner.log.fetch.wait-max-time", env("SCAN_WAIT", "0ms"));
        String props = env("CLIENT_PROPS", "").trim(); // extra client options: "k=v k=v"
        if (!props.isEmpty()) {
            for (String kv : props.split("\\s+")) {
                int i = kv.indexOf('=');
                if (i <= 0) throw new IllegalArgumentException("CLIENT_PROPS: not k=v: " + kv);
                conf.setString(kv.substring(0, i), kv.substring(i + 1));
            }
        }
        String out;
        try (Connection conn = ConnectionFactory.createConnection(conf);
                Admin admin = conn.getAdmin()) {
            out = args[0].equals("bench") ? bench(conn, admin) : check(conn, admin);
        }
        System.out.println(out);
        System.out.flush();
        // The client's non-daemon threads may linger after close; the result is out.
        System.exit(0);
    }

    // ---------------------------------------------------------------------------------------
    // data, as in Strom's genRow / genString / kvRows
    // ---------------------------------------------------------------------------------------

    /** A text-like string of exactly n bytes (ASCII words joined by spaces, then cut). */
    static String genString(SplittableRandom rng, int n) {
        StringBuilder b = new StringBuilder(n + 16);
        while (b.length() < n) {
            if (b.length() > 0) b.append(' ');
            b.append(WORDS[rng.nextInt(WORDS.length)]);
        }
        return b.substring(0, n);
    }

    /** Strom's pruningSchema(): 20 columns c00..c19 cycling INT, BIGINT, STRING, STRING. */
    static final String[] PRUNING_TYPES = {"INT", "BIGINT", "STRING", "STRING"};

    static Schema pruningSchema() {
        Schema.Builder s = Schema.newBuilder();
        for (int i = 0; i < 20; i++) {
            s.column(String.format("c%02d", i), type(PRUNING_TYPES[i % 4]));
        }
        return s.build();
    }

    static DataType type(String t) {
        switch (t) {
            case "INT": return DataTypes.INT();
            case "BIGINT": return DataTypes.BIGINT();
            default: return DataTypes.STRING();
        }
    }

    /** Strom's buildBatches: strings of (rowBytes - 8 per fixed column) / string columns. */
    static int pruningStrLen(int rowBytes) {
        int fixed = 0, strCols = 0;
        for (int i = 0; i < 20; i++) {
            if (PRUNING_TYPES[i % 4].equals("STRING")) strCols++; else fixed += 8;
        }
        return Math.max(1, (rowBytes - fixed) / strCols);
    }

    /** Payload bytes of the first `cols` columns of a pruning row (INT 4, BIGINT 8, STRING len). */
    static long pruningPayload(int cols, int strLen) {
        long b = 0;
        for (int i = 0; i < cols; i++) {
            String t = PRUNING_TYPES[i % 4];
            b += t.equals("INT") ? 4 : t.equals("BIGINT") ? 8 : strLen;
        }
        return b;
    }

    /** genRow for the pruning schema: INT uniform below 1e5, BIGINT below 1e9, text strings. */
    static GenericRow pruningRow(SplittableRandom rng, int strLen) {
        GenericRow r = new GenericRow(20);
        for (int i = 0; i < 20; i++) {
            switch (PRUNING_TYPES[i % 4]) {
                case "INT": r.setField(i, rng.nextInt(100000)); break;
                case "BIGINT": r.setField(i, rng.nextLong(1_000_000_000L)); break;
                default: r.setField(i, BinaryString.fromString(genString(rng, strLen)));
            }
        }
        return r;
    }

    /** Strom's PK bench table: id BIGINT (primary key), a INT, s1 STRING, s2 STRING. */
    static Schema kvSchema() {
        return Schema.newBuilder()
                .column("id", DataTypes.BIGINT())
                .column("a", DataTypes.INT())
                .column("s1", DataTypes.STRING())
                .column("s2", DataTypes.STRING())
                .primaryKey("id")
                .build();
    }

    /** The Fluss user's workload: 8 columns (id BIGINT PK, a INT, b BIGINT, c INT, s1..s4 STRING). */
    static Schema wideSchema() {
        return Schema.newBuilder()
                .column("id", DataTypes.BIGINT())
                .column("a", DataTypes.INT())
                .column("b", DataTypes.BIGINT())
                .column("c", DataTypes.INT())
                .column("s1", DataTypes.STRING())
                .column("s2", DataTypes.STRING())
                .column("s3", DataTypes.STRING())
                .column("s4", DataTypes.STRING())
                .primaryKey("id")
                .build();
    }

    /** The string length that makes a wide row rowBytes of payload (24 B of fixed columns, 4 strings). */
    static int wideStrLen(int rowBytes) {
        return Math.max(1, (rowBytes - 24) / 4);
    }

    /** n wide rows; keys drawn below 1e9, so a few repeat (upserts of an earlier key). */
    static List<GenericRow> wideRows(int n, int strLen, long seed) {
        SplittableRandom rng = new SplittableRandom(seed);
        List<GenericRow> rows = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            rows.add(GenericRow.of(rng.nextLong(1_000_000_000L), rng.nextInt(100000),
                    rng.nextLong(1_000_000_000L), rng.nextInt(100000),
                    BinaryString.fromString(genString(rng, strLen)), BinaryString.fromString(genString(rng, strLen)),
                    BinaryString.fromString(genString(rng, strLen)), BinaryString.fromString(genString(rng, strLen))));
        }
        return rows;
    }

    /** SHA-256 of the first 2000 wide rows, fields joined by '|', a row per line (see rowhash). */
    static String rowHashes() throws Exception {
        java.security.MessageDigest h = java.security.MessageDigest.getInstance("SHA-256");
        for (GenericRow r : wideRows(2000, wideStrLen(1024), 11)) {
            StringBuilder b = new StringBuilder();
            b.append(r.getLong(0)).append('|').append(r.getInt(1)).append('|').append(r.getLong(2)).append('|').append(r.getInt(3));
            for (int i = 4; i < 8; i++) b.append('|').append(r.getString(i));
            h.update(b.append('\n').toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }
        StringBuilder hex = new StringBuilder();
        for (byte x : h.digest()) hex.append(String.format("%02x", x));
        return "wide " + hex;
    }

    /** Every distinct key (column 0) of rows in first-seen order, shuffled with new Random(3). */
    static List<Long> lookupKeys(List<GenericRow> rows) {
        Set<Long> seen = new HashSet<>();
        List<Long> keys = new ArrayList<>();
        for (GenericRow r : rows) if (seen.add(r.getLong(0))) keys.add(r.getLong(0));
        java.util.Collections.shuffle(keys, new java.util.Random(3));
        return keys;
    }

    /** Upsert rows through one UpsertWriter, timed until its flush returns. */
    static Map<String, Object> upsertAll(Table t, List<GenericRow> rows, long payload) {
        UpsertWriter w = t.newUpsert().createWriter();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        CpuMeter cpu = new CpuMeter();
        long t0 = System.nanoTime();
        for (GenericRow r : rows) {
            w.upsert(r).whenComplete((ok, e) -> { if (e != null) failed.compareAndSet(null, e); });
        }
        w.flush();
        double secs = (System.nanoTime() - t0) / 1e9;
        if (failed.get() != null) throw new RuntimeException("upsert failed", failed.get());
        return cpu.put(rate(rows.size(), rows.size() * payload, secs), rows.size());
    }

    /** kvRows: strings of strLen bytes; a fraction updateRatio reuses the key of an earlier row. */
    static List<GenericRow> kvRows(int n, int strLen, double updateRatio, long seed) {
        SplittableRandom rng = new SplittableRandom(seed);
        List<GenericRow> rows = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            long id = rng.nextLong(1_000_000_000L);
            GenericRow r = GenericRow.of(id, rng.nextInt(100000),
                    BinaryString.fromString(genString(rng, strLen)),
                    BinaryString.fromString(genString(rng, strLen)));
            if (!rows.isEmpty() && rng.nextDouble() < updateRatio) {
                r.setField(0, rows.get(rng.nextInt(rows.size())).getLong(0));
            }
            rows.add(r);
        }
        return rows;
    }

    // ---------------------------------------------------------------------------------------
    // bench
    // ---------------------------------------------------------------------------------------

    static String bench(Connection conn, Admin admin) throws Exception {
        int n = intEnv("N", 200000);
        int kvN = intEnv("KV_N", 200000);
        int buckets = intEnv("BUCKETS", 2);
        int rowBytes = intEnv("ROW_BYTES", 2048);
        int kvStr = intEnv("KV_STR_BYTES", 100);
        double updateRatio = Double.parseDouble(env("UPDATE_RATIO", "0.3"));
        int inflight = intEnv("LOOKUP_INFLIGHT", 1000);
        String db = env("DB", "bench");

        admin.createDatabase(db, DatabaseDescriptor.EMPTY, true).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
        Map<String, Object> res = new LinkedHashMap<>();

        // (a) the log table "pruning": Strom's `bench pruning` (20 columns, ~2 KB a row, ZSTD 3)
        TablePath logPath = TablePath.of(db, "pruning_" + (System.currentTimeMillis() / 1000));
        TableDescriptor logDesc = TableDescriptor.builder()
                .schema(pruningSchema())
                .distributedBy(buckets)
                .property("table.log.format", "ARROW")
                .property("table.log.arrow.compression.type", "ZSTD")
                .property("table.log.arrow.compression.zstd.level", "3")
                .build();
        admin.createTable(logPath, logDesc, false).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
        int strLen = pruningStrLen(rowBytes);
        long rowPayload = pruningPayload(20, strLen);
        ERR.printf("[bench] generating %d pruning rows (%d B payload each, strings %d B) ...%n", n, rowPayload, strLen);
        SplittableRandom rng = new SplittableRandom(42);
        List<GenericRow> rows = new ArrayList<>(n);
        for (int i = 0; i < n; i++) rows.add(pruningRow(rng, strLen));

        try (Table t = conn.getTable(logPath)) {
            ERR.printf("[bench] produce: %d rows into %s (%d buckets), AppendWriter, acks=all%n", n, logPath, buckets);
            AppendWriter w = t.newAppend().createWriter();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            CpuMeter cpu = new CpuMeter();
            long t0 = System.nanoTime();
            for (GenericRow r : rows) {
                w.append(r).whenComplete((ok, e) -> { if (e != null) failed.compareAndSet(null, e); });
            }
            w.flush();
            double secs = (System.nanoTime() - t0) / 1e9;
            if (failed.get() != null) throw new RuntimeException("append failed", failed.get());
            Map<String, Object> prod = cpu.put(rate(n, (long) n * rowPayload, secs), n);
            // The log segments as stored (ZSTD batches as sent, with their headers), when the
            // tablet server's data dir is on this machine: Strom's produce MB/s counts those bytes.
            long stored = storedLogBytes(env("DATA_DIR", ""), db, logPath.getTableName(),
                    admin.getTableInfo(logPath).get(GET_TIMEOUT_S, TimeUnit.SECONDS).getTableId());
            if (stored > 0) {
                prod.put("stored_mib", round(stored / 1048576.0, 2));
                prod.put("stored_mib_s", round(stored / secs / 1048576.0, 2));
                prod.put("zstd_ratio", round((double) n * rowPayload / stored, 2));
            }
            res.put("produce", prod);
            ERR.printf("[bench] produce: %s%n", res.get("produce"));
            rows = null; // let the generated rows go before the scans
            System.gc();

            List<Integer> bl = new ArrayList<>();
            for (int b = 0; b < buckets; b++) bl.add(b);
            Map<Integer, Long> end = admin.listOffsets(logPath, bl, new OffsetSpec.LatestSpec())
                    .all().get(GET_TIMEOUT_S, TimeUnit.SECONDS);
            long total = end.values().stream().mapToLong(Long::longValue).sum();
            if (total != n) throw new IllegalStateException("log end offsets sum to " + total + ", wrote " + n);
            ERR.printf("[bench] end offsets %s%n", end);

            for (int cols : new int[] {20, 1, 5, 10}) {
                String key = cols == 20 ? "scan_all" : "scan_" + cols + "col";
                int[] proj = cols == 20 ? null : range(cols);
                Map<String, Object> r = scanAll(t, buckets, proj, total, cols, pruningPayload(cols, strLen));
                res.put(key, r);
                ERR.printf("[bench] %s: %s%n", key, r);
            }
        }

        // (b) the primary-key table: Strom's `bench upsert` + `bench lookup`
        TablePath kvPath = TablePath.of(db, "kv_" + (System.currentTimeMillis() / 1000));
        TableDescriptor kvDesc = TableDescriptor.builder()
                .schema(kvSchema())
                .distributedBy(buckets, "id")
                .build();
        admin.createTable(kvPath, kvDesc, false).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
        ERR.printf("[bench] generating %d kv rows (%.0f%% updates, strings %d B) ...%n", kvN, updateRatio * 100, kvStr);
        List<GenericRow> kv = kvRows(kvN, kvStr, updateRatio, 7);
        long kvPayload = 8 + 4 + 2L * kvStr;
        try (Table t = conn.getTable(kvPath)) {
            ERR.printf("[bench] upsert: %d rows into %s (%d buckets), UpsertWriter, acks=all%n", kvN, kvPath, buckets);
            res.put("upsert", upsertAll(t, kv, kvPayload));
            ERR.printf("[bench] upsert: %s%n", res.get("upsert"));

            // every distinct key, shuffled (Strom scans the table for them, then shuffles)
            List<Long> keys = lookupKeys(kv);
            kv = null;
            Map<String, Object> lk = lookups(t, keys, inflight);
            res.put("lookup", lk);
            ERR.printf("[bench] lookup: %s%n", lk);
        }
        List<TablePath> tables = new ArrayList<>(Arrays.asList(logPath, kvPath));
        int wideN = intEnv("WIDE_N", 100000);
        int wideBuckets = intEnv("WIDE_BUCKETS", 8);
        int wideRowBytes = intEnv("WIDE_ROW_BYTES", 1024);
        int wideBatch = intEnv("WIDE_LOOKUP_BATCH", 100);
        if (wideN > 0) {
            // (c) the Fluss user's workload: 8 columns of ~1 KB a row in 8 buckets, upserted,
            // then looked up with 100 keys a request (client.lookup.batch-size)
            TablePath widePath = TablePath.of(db, "wide_" + (System.currentTimeMillis() / 1000));
            tables.add(widePath);
            admin.createTable(widePath, TableDescriptor.builder().schema(wideSchema()).distributedBy(wideBuckets, "id").build(), false)
                    .get(GET_TIMEOUT_S, TimeUnit.SECONDS);
            int wideStr = wideStrLen(wideRowBytes);
            ERR.printf("[bench] generating %d wide rows (8 columns, strings %d B) ...%n", wideN, wideStr);
            List<GenericRow> wide = wideRows(wideN, wideStr, 11);
            Configuration wideConf = new Configuration(conf);
            wideConf.setString("client.lookup.batch-size", Integer.toString(wideBatch));
            try (Connection wc = ConnectionFactory.createConnection(wideConf); Table t = wc.getTable(widePath)) {
                ERR.printf("[bench] upsert_wide: %d rows into %s (%d buckets), UpsertWriter, acks=all%n", wideN, widePath, wideBuckets);
                res.put("upsert_wide", upsertAll(t, wide, 24L + 4L * wideStr));
                ERR.printf("[bench] upsert_wide: %s%n", res.get("upsert_wide"));
                List<Long> keys = lookupKeys(wide);
                wide = null;
                System.gc();
                res.put("lookup_wide", lookups(t, keys, inflight));
                ERR.printf("[bench] lookup_wide: %s%n", res.get("lookup_wide"));
            }
        }
        if (!env("KEEP", "0").equals("1")) {
            for (TablePath p : tables) admin.dropTable(p, true).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
        }
        Map<String, Object> params = new LinkedHashMap<>();
        params.put("n", n);
        params.put("kv_n", kvN);
        params.put("buckets", buckets);
        params.put("row_bytes", rowPayload);
        params.put("kv_row_bytes", kvPayload);
        params.put("update_ratio", updateRatio);
        params.put("lookup_inflight", inflight);
        params.put("wide_n", wideN);
        params.put("wide_buckets", wideBuckets);
        params.put("wide_lookup_batch", wideBatch);
        params.put("compression", "ZSTD(3)");
        params.put("acks", "all");
        Map<String, Object> all = new LinkedHashMap<>(params);
        all.putAll(res);
        return json(all);
    }

    /** Bytes of the *.log segment files of DATA_DIR/db/table-id/log-N/ (0 if not found). */
    static long storedLogBytes(String dataDir, String db, String table, long tableId) throws java.io.IOException {
        if (dataDir.isEmpty()) return 0;
        java.nio.file.Path dir = java.nio.file.Paths.get(dataDir, db, table + "-" + tableId);
        if (!java.nio.file.Files.isDirectory(dir)) return 0;
        try (java.util.stream.Stream<java.nio.file.Path> files = java.nio.file.Files.walk(dir)) {
            return files.filter(f -> f.getFileName().toString().endsWith(".log")
                            && f.getParent().getFileName().toString().startsWith("log-"))
                    .mapToLong(f -> f.toFile().length()).sum();
        }
    }

    static int[] range(int n) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) p[i] = i;
        return p;
    }

    static Map<String, Object> rate(long records, long bytes, double secs) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("records", records);
        m.put("seconds", round(secs, 3));
        m.put("records_s", Math.round(records / secs));
        m.put("mib_s", round(bytes / secs / 1048576.0, 2));
        return m;
    }

    /** Subscribe every bucket from the beginning and poll until `total` records have come. */
    static Map<String, Object> scanAll(Table t, int buckets, int[] proj, long total, int cols, long payload)
            throws Exception {
        LogScanner sc = proj == null ? t.newScan().createLogScanner() : t.newScan().project(proj).createLogScanner();
        try {
            for (int b = 0; b < buckets; b++) sc.subscribeFromBeginning(b);
            long got = 0, checksum = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(GET_TIMEOUT_S);
            CpuMeter cpu = new CpuMeter();
            long t0 = System.nanoTime();
            while (got < total) {
                ScanRecords rs = sc.poll(Duration.ofMillis(500));
                for (ScanRecord r : rs) {
                    got++;
                    checksum += r.getRow().getFieldCount(); // the row as the reader gets it
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("scan of " + cols + " columns: " + got + " of " + total + " records in " + GET_TIMEOUT_S + "s");
                }
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            if (checksum != got * cols) throw new IllegalStateException("projected rows have " + checksum / Math.max(1, got) + " fields, want " + cols);
            Map<String, Object> m = rate(got, got * payload, secs);
            m.put("columns", cols);
            return cpu.put(m, got);
        } finally {
            sc.close();
        }
    }

    /** Look every key up with at most `inflight` lookups outstanding (the client batches them). */
    static Map<String, Object> lookups(Table t, List<Long> keys, int inflight) throws Exception {
        Lookuper lk = t.newLookup().createLookuper();
        int n = keys.size();
        long[] lat = new long[n];
        Semaphore slots = new Semaphore(inflight);
        CountDownLatch done = new CountDownLatch(n);
        AtomicInteger missing = new AtomicInteger();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        ERR.printf("[bench] lookup: %d distinct keys, %d in flight%n", n, inflight);
        CpuMeter cpu = new CpuMeter();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            if (!slots.tryAcquire(GET_TIMEOUT_S, TimeUnit.SECONDS)) throw new IllegalStateException("lookups stalled");
            final int idx = i;
            final long s = System.nanoTime();
            CompletableFuture<LookupResult> f = lk.lookup(GenericRow.of(keys.get(i)));
            f.whenComplete((r, e) -> {
                lat[idx] = System.nanoTime() - s;
                if (e != null) failed.compareAndSet(null, e);
                else if (r.getSingletonRow() == null) missing.incrementAndGet();
                slots.release();
                done.countDown();
            });
        }
        if (!done.await(GET_TIMEOUT_S, TimeUnit.SECONDS)) throw new IllegalStateException("lookups did not finish");
        double secs = (System.nanoTime() - t0) / 1e9;
        if (failed.get() != null) throw new RuntimeException("lookup failed", failed.get());
        if (missing.get() > 0) throw new IllegalStateException(missing.get() + " upserted keys not found by lookup");
        Arrays.sort(lat);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("keys", n);
        m.put("inflight", inflight);
        m.put("seconds", round(secs, 3));
        m.put("ops_s", Math.round(n / secs));
        m.put("p50_ms", round(lat[n / 2] / 1e6, 3));
        m.put("p99_ms", round(lat[Math.min(n - 1, (int) (n * 0.99))] / 1e6, 3));
        return cpu.put(m, n);
    }

    /**
     * A workload's CPU cost, from the kernel's accounting rather than the clock, as
     * internal/peerbench/cpu.go measures it: this JVM's CPU time (the client: every thread, JIT
     * and GC included) and the summed utime + stime of the server processes in SERVER_PIDS
     * (space- or comma-separated; /proc/PID/stat, in ticks of 10 ms).
     */
    static final class CpuMeter {
        private final long client = processCpuNanos();
        private final long server = serversCpuNanos();

        /** Adds client_cpu_s, client_cpu_us (a record) and, with SERVER_PIDS, the servers' to m. */
        Map<String, Object> put(Map<String, Object> m, long records) {
            long c = processCpuNanos() - client;
            m.put("client_cpu_s", round(c / 1e9, 3));
            m.put("client_cpu_us", records > 0 ? round(c / 1e3 / records, 3) : 0.0);
            long s = serversCpuNanos();
            if (server >= 0 && s >= 0) {
                m.put("server_cpu_s", round((s - server) / 1e9, 3));
                m.put("server_cpu_us", records > 0 ? round((s - server) / 1e3 / records, 3) : 0.0);
            }
            return m;
        }

        static long processCpuNanos() {
            java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
            return os instanceof com.sun.management.OperatingSystemMXBean
                    ? ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() : 0;
        }

        /** The servers' CPU time in ns, -1 without SERVER_PIDS or when one cannot be read. */
        static long serversCpuNanos() {
            String pids = env("SERVER_PIDS", "").trim();
            if (pids.isEmpty()) return -1;
            long ticks = 0;
            for (String p : pids.split("[\\s,]+")) {
                try {
                    String stat = new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get("/proc", p, "stat")));
                    String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" +");
                    ticks += Long.parseLong(f[11]) + Long.parseLong(f[12]); // fields 14 and 15
                } catch (Exception e) {
                    return -1;
                }
            }
            return ticks * 10_000_000L;
        }
    }

    // ---------------------------------------------------------------------------------------
    // check: a short functional run (db, log table, PK table, 1000 rows each way)
    // ---------------------------------------------------------------------------------------

    static String check(Connection conn, Admin admin) {
        Map<String, Object> steps = new LinkedHashMap<>();
        String db = env("DB", "check_" + (System.currentTimeMillis() / 1000));
        TablePath logPath = TablePath.of(db, "log1");
        TablePath kvPath = TablePath.of(db, "kv1");
        int rows = intEnv("CHECK_ROWS", 1000);
        String step = "";
        try {
            step = "list_databases";
            steps.put(step, admin.listDatabases().get(GET_TIMEOUT_S, TimeUnit.SECONDS).toString());
            step = "server_nodes";
            steps.put(step, admin.getServerNodes().get(GET_TIMEOUT_S, TimeUnit.SECONDS).size());

            step = "create_database";
            admin.createDatabase(db, DatabaseDescriptor.EMPTY, false).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
            if (!admin.databaseExists(db).get(GET_TIMEOUT_S, TimeUnit.SECONDS)) throw new IllegalStateException("database not found after create");
            steps.put(step, "ok");

            step = "create_log_table";
            Schema logSchema = Schema.newBuilder()
                    .column("id", DataTypes.INT())
                    .column("name", DataTypes.STRING())
                    .column("v", DataTypes.BIGINT())
                    .build();
            admin.createTable(logPath, TableDescriptor.builder().schema(logSchema).distributedBy(2)
                    .property("table.log.arrow.compression.type", "ZSTD").build(), false)
                    .get(GET_TIMEOUT_S, TimeUnit.SECONDS);
            long logId = admin.getTableInfo(logPath).get(GET_TIMEOUT_S, TimeUnit.SECONDS).getTableId();
            steps.put(step, "ok (table id " + logId + ")");

            try (Table t = conn.getTable(logPath)) {
                step = "append";
                AppendWriter w = t.newAppend().createWriter();
                List<CompletableFuture<?>> fs = new ArrayList<>();
                for (int i = 0; i < rows; i++) {
                    fs.add(w.append(GenericRow.of(i, BinaryString.fromString("row-" + i), (long) i * 7)));
                }
                w.flush();
                CompletableFuture.allOf(fs.toArray(new CompletableFuture[0])).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
                steps.put(step, rows + " rows ok");

                step = "list_offsets";
                Map<Integer, Long> end = admin.listOffsets(logPath, Arrays.asList(0, 1), new OffsetSpec.LatestSpec())
                        .all().get(GET_TIMEOUT_S, TimeUnit.SECONDS);
                long sum = end.values().stream().mapToLong(Long::longValue).sum();
                if (sum != rows) throw new IllegalStateException("end offsets " + end + " sum to " + sum + ", want " + rows);
                steps.put(step, end.toString());

                step = "scan";
                Map<Integer, String> back = new HashMap<>();
                try (LogScanner sc = t.newScan().createLogScanner()) {
                    sc.subscribeFromBeginning(0);
                    sc.subscribeFromBeginning(1);
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                    while (back.size() < rows && System.nanoTime() < deadline) {
                        for (ScanRecord r : sc.poll(Duration.ofMillis(500))) {
                            InternalRow row = r.getRow();
                            int id = row.getInt(0);
                            String want = "row-" + id;
                            if (!row.getString(1).toString().equals(want) || row.getLong(2) != (long) id * 7) {
                                throw new IllegalStateException("row " + id + " read back wrong: " + row);
                            }
                            if (back.put(id, want) != null) throw new IllegalStateException("row " + id + " read twice");
                        }
                    }
                }
                if (back.size() != rows) throw new IllegalStateException("read back " + back.size() + " of " + rows + " rows in 60s");
                steps.put(step, rows + " rows ok");

                step = "scan_projected";
                long got = 0;
                try (LogScanner sc = t.newScan().project(Arrays.asList("v")).createLogScanner()) {
                    sc.subscribeFromBeginning(0);
                    sc.subscribeFromBeginning(1);
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                    while (got < rows && System.nanoTime() < deadline) {
                        for (ScanRecord r : sc.poll(Duration.ofMillis(500))) {
                            if (r.getRow().getFieldCount() != 1) throw new IllegalStateException("projection has " + r.getRow().getFieldCount() + " fields");
                            got++;
                        }
                    }
                }
                if (got != rows) throw new IllegalStateException("projected scan read " + got + " of " + rows);
                steps.put(step, rows + " rows ok");
            }

            step = "create_pk_table";
            Schema kvSchema = Schema.newBuilder()
                    .column("id", DataTypes.INT())
                    .column("name", DataTypes.STRING())
                    .column("v", DataTypes.BIGINT())
                    .primaryKey("id")
                    .build();
            admin.createTable(kvPath, TableDescriptor.builder().schema(kvSchema).distributedBy(2, "id").build(), false)
                    .get(GET_TIMEOUT_S, TimeUnit.SECONDS);
            steps.put(step, "ok");

            try (Table t = conn.getTable(kvPath)) {
                step = "upsert";
                UpsertWriter w = t.newUpsert().createWriter();
                List<CompletableFuture<?>> fs = new ArrayList<>();
                for (int i = 0; i < rows; i++) fs.add(w.upsert(GenericRow.of(i, BinaryString.fromString("k-" + i), (long) i)));
                for (int i = 0; i < rows; i += 10) fs.add(w.upsert(GenericRow.of(i, BinaryString.fromString("u-" + i), (long) -i)));
                w.flush();
                CompletableFuture.allOf(fs.toArray(new CompletableFuture[0])).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
                steps.put(step, rows + " rows + " + (rows / 10) + " updates ok");

                step = "lookup";
                Lookuper lk = t.newLookup().createLookuper();
                List<CompletableFuture<LookupResult>> ls = new ArrayList<>();
                for (int i = 0; i < rows; i++) ls.add(lk.lookup(GenericRow.of(i)));
                for (int i = 0; i < rows; i++) {
                    InternalRow r = ls.get(i).get(GET_TIMEOUT_S, TimeUnit.SECONDS).getSingletonRow();
                    boolean upd = i % 10 == 0;
                    String wantName = (upd ? "u-" : "k-") + i;
                    long wantV = upd ? -i : i;
                    if (r == null) throw new IllegalStateException("key " + i + " not found");
                    if (!r.getString(1).toString().equals(wantName) || r.getLong(2) != wantV) {
                        throw new IllegalStateException("key " + i + " has " + r);
                    }
                }
                InternalRow none = lk.lookup(GenericRow.of(rows + 12345)).get(GET_TIMEOUT_S, TimeUnit.SECONDS).getSingletonRow();
                if (none != null) throw new IllegalStateException("a key never written was found: " + none);
                steps.put(step, rows + " keys ok, absent key absent");
            }

            step = "drop";
            admin.dropTable(logPath, false).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
            admin.dropTable(kvPath, false).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
            admin.dropDatabase(db, false, true).get(GET_TIMEOUT_S, TimeUnit.SECONDS);
            if (admin.databaseExists(db).get(GET_TIMEOUT_S, TimeUnit.SECONDS)) throw new IllegalStateException("database still there after drop");
            steps.put(step, "ok");

            Map<String, Object> m = new LinkedHashMap<>();
            m.put("database", db);
            m.put("steps", steps);
            m.put("check_ok", true);
            return json(m);
        } catch (Throwable e) {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            ERR.println("[check] step " + step + " failed:");
            e.printStackTrace(ERR);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("database", db);
            m.put("steps", steps);
            m.put("failed_step", step);
            m.put("check_error", root.getClass().getSimpleName() + ": " + root.getMessage());
            m.put("check_ok", false);
            return json(m);
        }
    }

    // ---------------------------------------------------------------------------------------
    // small helpers
    // ---------------------------------------------------------------------------------------

    static String env(String k, String d) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? d : v;
    }

    static int intEnv(String k, int d) {
        return Integer.parseInt(env(k, Integer.toString(d)));
    }

    static double round(double v, int places) {
        double p = Math.pow(10, places);
        return Math.round(v * p) / p;
    }

    /** A JSON object of strings, numbers, booleans and nested maps (no outer newline). */
    @SuppressWarnings("unchecked")
    static String json(Map<String, Object> m) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, Object> e : m.entrySet()) {
            if (!first) b.append(',');
            first = false;
            b.append(quote(e.getKey())).append(':');
            Object v = e.getValue();
            if (v instanceof Map) b.append(json((Map<String, Object>) v));
            else if (v instanceof Number || v instanceof Boolean) b.append(String.format(Locale.ROOT, "%s", v));
            else b.append(quote(String.valueOf(v)));
        }
        return b.append('}').toString();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
