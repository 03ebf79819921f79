/*
 * Quickstart: runs the statements of Fluss's Flink SQL quickstart in order, as their user types
 * them into Flink's SQL client, on one Flink MiniCluster in this JVM, and checks each result
 * (scripts/flink-quickstart.sh).
 *
 *   java Quickstart BOOTSTRAP SOURCES_SQL QUICKSTART_SQL
 *   java Quickstart --sql-client BOOTSTRAP SOURCES_SQL    Flink's SQL client on this terminal
 *                                                         (scripts/flink-sql.sh)
 *
 * Every statement prints one line on stdout, "ok    N  <statement>  (<what>, <seconds> s)" or
 * "error N  <statement>: <why>"; the last line is "PASS" when every statement and check held,
 * else "FAIL" (exit 1).
 *
 * CLIENT=sql-client types the statements into Flink's own SQL client (SqlClient in embedded mode,
 * in a JVM of its own, SOURCES_SQL its init file -i as in Fluss's docker image, its jobs sent to
 * this MiniCluster through FLINK_CONF_DIR) and reads what it prints up to its next prompt.
 * CLIENT=table-api (the default) runs them through the Table API with the SQL client's rules
 * (TableApiSession). Either way jobs go to the MiniCluster through its REST endpoint (execution.target
 * remote), so a streaming INSERT outlives its statement and can be cancelled.
 *
 * Directives, lines "-- @..." between statements:
 *   -- @await TABLE=N ...  a second session in batch mode repeats SELECT COUNT(*) FROM TABLE until
 *                          each table holds N rows (AWAIT_S, 300 s), as the quickstart tells its user
 *   -- @cancel             cancel every job still running
 *   -- @expect CHECK ...   checks of the previous statement's rows, all must hold:
 *                          rows=N (N rows), count=N (one row whose last column is N),
 *                          notnull=A,B (columns A and B are not NULL in any row), COL=V (column
 *                          COL is V in every row), last.COL=V (column COL is V in the last row),
 *                          same=prev (the rows are those of the statement before it)
 *   -- @until N SQL        a second session in batch mode repeats SQL until its first row's last
 *                          column is at least N (AWAIT_S), as the lakehouse quickstart's "wait"
 *   -- @flink-run ARGS     "flink run ARGS" from another terminal: Flink's CliFrontend in a new
 *                          JVM (this JVM's options and classpath) against this MiniCluster's REST
 *                          endpoint, until it exits; ok when it exits 0 naming a job id
 * ${NAME} in the SQL is replaced by the environment variable NAME (BOOTSTRAP: the first argument).
 * Env: CLIENT (table-api | sql-client), SQL_CLIENT_CLASSPATH (the SQL client's: this JVM's plus
 * flink-sql-client, flink-sql-gateway, flink-sql-gateway-api, flink-python, flink-json), SLOTS (10),
 * STATEMENT_S (180), AWAIT_S (300).
 */
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.client.deployment.StandaloneClusterId;
import org.apache.flink.client.program.rest.RestClusterClient;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.client.JobStatusMessage;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class Quickstart {
    static final int STATEMENT_S = envInt("STATEMENT_S", 180);
    static final int AWAIT_S = envInt("AWAIT_S", 300);
    static final ExecutorService POOL = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "collect");
        t.setDaemon(true);
        return t;
    });
    static URI rest;
    static int step;
    static boolean allOk = true;

    /** One session of statements: what its user typed, one at a time. */
    abstract static class Session implements AutoCloseable {
        /** The statements a second session replays to see the same catalog: CREATE CATALOG, USE. */
        final List<String> catalog = new ArrayList<>();

        /** Runs stmt; its rows when it has any, else what happened. Throws when it failed. */
        abstract Result execute(String stmt) throws Exception;

        /** A second session, as from another terminal: the catalog of this one, in batch mode. */
        abstract Session observer() throws Exception;

        @Override
        public void close() {}
    }

    /** The result of one statement: its columns and rows (null when it has none), or what happened. */
    static final class Result {
        List<String> cols;
        List<List<String>> rows;
        String what;
    }

    /**
     * A session through the Table API with the SQL client's rules (the SQL gateway does the same):
     * SET goes into the session's configuration; a change of execution.runtime-mode makes a new
     * TableEnvironment into which CREATE CATALOG, CREATE TEMPORARY and USE are replayed; with
     * table.dml-sync an INSERT/UPDATE/DELETE waits for its job, without it the job keeps running.
     */
    static final class TableApiSession extends Session {
        final Map<String, String> conf = new LinkedHashMap<>();
        final List<String> replay = new ArrayList<>();
        TableEnvironment env;

        boolean batch() {
            return "batch".equalsIgnoreCase(conf.getOrDefault("execution.runtime-mode", "streaming"));
        }

        TableEnvironment env() throws Exception {
            if (env == null) {
                Configuration c = new Configuration();
                c.set(DeploymentOptions.TARGET, "remote");
                c.set(RestOptions.ADDRESS, rest.getHost());
                c.set(RestOptions.PORT, rest.getPort());
                conf.forEach(c::setString);
                EnvironmentSettings.Builder b = EnvironmentSettings.newInstance().withConfiguration(c);
                env = TableEnvironment.create((batch() ? b.inBatchMode() : b.inStreamingMode()).build());
                for (String s : replay) env.executeSql(s).await();
            }
            return env;
        }

        void set(String k, String v) {
            String old = conf.put(k, v);
            if (k.equals("execution.runtime-mode") && !v.equalsIgnoreCase(old == null ? "streaming" : old)) env = null;
            else if (env != null) env.getConfig().getConfiguration().setString(k, v);
        }

        @Override
        Result execute(String stmt) throws Exception {
            Result res = new Result();
            Matcher set = Pattern.compile("(?is)^SET\\s+'([^']+)'\\s*=\\s*'([^']*)'$").matcher(stmt);
            if (set.matches()) {
                set(set.group(1), set.group(2));
                res.what = "set";
                return res;
            }
            String upper = stmt.toUpperCase(Locale.ROOT);
            TableResult r = env().executeSql(stmt);
            if (upper.startsWith("CREATE CATALOG") || upper.startsWith("USE ")) catalog.add(stmt);
            if (upper.startsWith("CREATE CATALOG") || upper.startsWith("CREATE TEMPORARY") || upper.startsWith("USE ")) replay.add(stmt);
            Optional<JobClient> job = r.getJobClient();
            if (upper.startsWith("SELECT") || upper.startsWith("SHOW") || !job.isPresent()) {
                res.cols = r.getResolvedSchema().getColumnNames();
                res.rows = collect(r, job);
                res.what = res.rows.size() + (res.rows.size() == 1 ? " row" : " rows");
            } else if ("true".equalsIgnoreCase(conf.get("table.dml-sync"))) {
                r.await(STATEMENT_S, TimeUnit.SECONDS);
                JobStatus st = job.get().getJobStatus().get(10, TimeUnit.SECONDS);
                if (st != JobStatus.FINISHED) throw new IllegalStateException("job " + job.get().getJobID() + " ended " + st);
                res.what = "job " + st;
            } else {
                res.what = "job " + job.get().getJobStatus().get(10, TimeUnit.SECONDS);
            }
            return res;
        }

        @Override
        Session observer() {
            TableApiSession obs = new TableApiSession();
            obs.conf.put("execution.runtime-mode", "batch");
            obs.replay.addAll(catalog);
            obs.catalog.addAll(catalog);
            return obs;
        }
    }

    /**
     * A session of Flink's own SQL client (org.apache.flink.table.client.SqlClient in embedded
     * mode, as sql-client.sh starts it) in a JVM of its own, its jobs going to this MiniCluster:
     * each statement is typed into its standard input (a pipe, which it reads through JLine's dumb
     * terminal) and what it prints up to its next prompt is the statement's outcome: [ERROR] a
     * failure, a tableau table the rows, [INFO] lines what happened.
     */
    static final class SqlClientSession extends Session {
        static final String PROMPT = "Flink SQL> ";
        static final Pattern ANSI = Pattern.compile("\u001b\\[[0-9;?]*[A-Za-z]");
        final Process p;
        final java.io.OutputStream in;
        final StringBuilder out = new StringBuilder(); // guarded by itself
        boolean eof; // guarded by out

        /** Starts a SQL client; init, if not null, is its -i file (run before the first prompt). */
        SqlClientSession(String name, String init) throws Exception {
            ProcessBuilder pb = new ProcessBuilder(sqlClientCommand(name, init)).redirectErrorStream(true);
            pb.environment().put("FLINK_CONF_DIR", flinkConf().toString());
            p = pb.start();
            in = p.getOutputStream();
            Thread t = new Thread(() -> {
                byte[] b = new byte[8192];
                try (java.io.InputStream s = p.getInputStream()) {
                    for (int n; (n = s.read(b)) > 0; ) {
                        synchronized (out) {
                            out.append(new String(b, 0, n, StandardCharsets.UTF_8));
                            out.notifyAll();
                        }
                    }
                } catch (java.io.IOException ignored) {
                    // the client exited
                }
                synchronized (out) {
                    eof = true;
                    out.notifyAll();
                }
            }, "sql-client-" + name);
            t.setDaemon(true);
            t.start();
            toPrompt(120);
        }

        /** What the client printed until its next prompt, without the prompt and escapes. */
        String toPrompt(int seconds) throws Exception {
            long end = System.nanoTime() + seconds * 1_000_000_000L;
            synchronized (out) {
                while (true) {
                    String s = ANSI.matcher(out).replaceAll("").replace("\r", "");
                    if (s.endsWith(PROMPT)) {
                        out.setLength(0);
                        return s.substring(0, s.length() - PROMPT.length());
                    }
                    long left = (end - System.nanoTime()) / 1_000_000;
                    if (eof || left <= 0) {
                        String tail = s.length() > 1500 ? s.substring(s.length() - 1500) : s;
                        throw new IllegalStateException((eof ? "the SQL client exited" : "no prompt after " + seconds + " s")
                                + ": " + tail.replaceAll("\\s+", " "));
                    }
                    out.wait(Math.min(left, 500));
                }
            }
        }

        @Override
        Result execute(String stmt) throws Exception {
            in.write((stmt + ";\n").getBytes(StandardCharsets.UTF_8));
            in.flush();
            String o = toPrompt(STATEMENT_S);
            Matcher err = Pattern.compile("(?s)\\[ERROR\\](.*)").matcher(o);
            if (err.find()) throw new IllegalStateException(err.group(1).trim().replaceAll("\\s+", " "));
            String upper = stmt.toUpperCase(Locale.ROOT);
            if (upper.startsWith("CREATE CATALOG") || upper.startsWith("USE ")) catalog.add(stmt);
            Result res = tableau(o);
            if (res.rows != null) {
                res.what = res.rows.size() + (res.rows.size() == 1 ? " row" : " rows");
            } else {
                List<String> infos = new ArrayList<>();
                for (Matcher m = Pattern.compile("\\[INFO\\] ([^\n]*)").matcher(o); m.find(); ) infos.add(m.group(1).trim());
                Matcher job = Pattern.compile("Job ID: ([0-9a-f]{32})").matcher(o);
                if (job.find()) infos.add("Job ID: " + job.group(1));
                res.what = infos.isEmpty() ? "ok" : String.join(" ", infos);
            }
            return res;
        }

        @Override
        Session observer() throws Exception {
            SqlClientSession obs = new SqlClientSession("observer", null);
            for (String s : catalog) obs.execute(s);
            obs.execute("SET 'execution.runtime-mode' = 'batch'");
            obs.execute("SET 'sql-client.execution.result-mode' = 'tableau'");
            return obs;
        }

        @Override
        public void close() {
            try {
                in.write("QUIT;\n".getBytes(StandardCharsets.UTF_8));
                in.flush();
                if (p.waitFor(30, TimeUnit.SECONDS)) return;
            } catch (Exception ignored) {
                // it is killed below
            }
            p.destroyForcibly();
        }
    }

    /**
     * The rows of a tableau result ("| a | b |" lines, the first the header; NULL as the Table API
     * prints it), none for "Empty set"; rows null when the output has no table.
     */
    static Result tableau(String o) {
        Result r = new Result();
        List<List<String>> lines = new ArrayList<>();
        for (String l : o.split("\n")) {
            String t = l.trim();
            if (t.length() < 2 || !t.startsWith("|") || !t.endsWith("|")) continue;
            List<String> cells = new ArrayList<>();
            for (String c : t.substring(1, t.length() - 1).split("\\|", -1)) cells.add(c.trim().equals("<NULL>") ? "NULL" : c.trim());
            lines.add(cells);
        }
        if (!lines.isEmpty()) {
            r.cols = lines.get(0);
            r.rows = lines.subList(1, lines.size());
        } else if (o.contains("Empty set")) {
            r.cols = new ArrayList<>();
            r.rows = new ArrayList<>();
        }
        return r;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("--sql-client")) {
            interactive(args[1], args[2]);
            return;
        }
        // a SIGTERM takes the SQL clients and "flink run"s this JVM started with it
        Runtime.getRuntime().addShutdownHook(new Thread(() -> ProcessHandle.current().descendants().forEach(ProcessHandle::destroyForcibly)));
        Map<String, String> vars = new HashMap<>(System.getenv());
        vars.put("BOOTSTRAP", args[0]);
        MiniCluster cluster = startCluster(envInt("SLOTS", 10));
        rest = cluster.getRestAddress().get();
        Session main = null;
        int first = 1;
        if ("sql-client".equals(System.getenv("CLIENT"))) {
            // the sources are the SQL client's init file (-i), as in Fluss's docker image
            long t0 = System.nanoTime();
            String label = "(start Flink's SQL client, -i " + Paths.get(args[1]).getFileName() + ")";
            try {
                main = new SqlClientSession("main", initFile(args[1], vars));
                report(true, label, "prompt", t0, null);
            } catch (Exception e) {
                report(false, label, null, t0, describe(e));
            }
            first = 2;
        } else {
            main = new TableApiSession();
        }
        Result last = null, before = null;
        for (int f = first; f < args.length && main != null; f++) {
            String script = new String(Files.readAllBytes(Paths.get(args[f])), StandardCharsets.UTF_8);
            for (String part : split(subst(script, vars))) {
                if (part.startsWith("-- @expect")) {
                    check(last, before, part.substring("-- @expect".length()).trim());
                } else if (part.startsWith("-- @until")) {
                    until(main, part.substring("-- @until".length()).trim());
                    last = null;
                } else if (part.startsWith("-- @flink-run")) {
                    flinkRun(part.substring("-- @flink-run".length()).trim());
                    last = null;
                } else if (part.startsWith("-- @await")) {
                    await(main, part.substring("-- @await".length()).trim());
                    last = null;
                } else if (part.startsWith("-- @cancel")) {
                    long t0 = System.nanoTime();
                    try {
                        int n = cancelAll();
                        report(true, "(cancel the running jobs)", n + " cancelled", t0, null);
                    } catch (Exception e) {
                        report(false, "(cancel the running jobs)", null, t0, describe(e));
                    }
                    last = null;
                } else {
                    before = last;
                    last = statement(main, part);
                }
            }
        }
        if (main != null) main.close();
        try {
            cancelAll();
            cluster.closeAsync().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            System.err.println("closing the MiniCluster: " + e);
        }
        System.out.println(allOk ? "PASS" : "FAIL");
        System.out.flush();
        System.exit(allOk ? 0 : 1);
    }

    /**
     * --sql-client BOOTSTRAP SOURCES_SQL: Flink's SQL client on this terminal, its jobs on a
     * MiniCluster in this JVM, SOURCES_SQL its init file; the cluster ends when the client does.
     */
    static void interactive(String bootstrap, String sources) throws Exception {
        Map<String, String> vars = new HashMap<>(System.getenv());
        vars.put("BOOTSTRAP", bootstrap);
        MiniCluster cluster = startCluster(envInt("SLOTS", 10));
        rest = cluster.getRestAddress().get();
        System.out.println("Flink " + org.apache.flink.runtime.util.EnvironmentInformation.getVersion()
                + " MiniCluster up (web UI " + rest + "); the source tables of " + sources + " are in default_catalog.");
        System.out.println("Strom's Fluss listener: CREATE CATALOG fluss_catalog WITH ('type' = 'fluss', 'bootstrap.servers' = '"
                + bootstrap + "');");
        System.out.flush();
        ProcessBuilder pb = new ProcessBuilder(sqlClientCommand("interactive", initFile(sources, vars))).inheritIO();
        pb.environment().put("FLINK_CONF_DIR", flinkConf().toString());
        int rc = pb.start().waitFor();
        cancelAll();
        cluster.closeAsync().get(30, TimeUnit.SECONDS);
        System.exit(rc);
    }

    static MiniCluster startCluster(int slots) throws Exception {
        Configuration c = new Configuration();
        c.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        c.set(RestOptions.ADDRESS, "127.0.0.1");
        c.set(RestOptions.BIND_PORT, "0");
        c.set(JobManagerOptions.ADDRESS, "127.0.0.1");
        c.set(TaskManagerOptions.HOST, "127.0.0.1");
        c.set(TaskManagerOptions.NUM_TASK_SLOTS, slots);
        MiniCluster m = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(c).setNumTaskManagers(1).setNumSlotsPerTaskManager(slots).build());
        m.start();
        return m;
    }

    static java.nio.file.Path flinkConf;

    /** A FLINK_CONF_DIR whose config.yaml sends jobs to this MiniCluster, as a client's would. */
    static synchronized java.nio.file.Path flinkConf() throws java.io.IOException {
        if (flinkConf == null) {
            flinkConf = Files.createTempDirectory("flink-conf");
            Files.write(flinkConf.resolve("config.yaml"), ("execution.target: remote\nrest.address: " + rest.getHost()
                    + "\nrest.port: " + rest.getPort() + "\n").getBytes(StandardCharsets.UTF_8));
        }
        return flinkConf;
    }

    /** java with this JVM's options (its log file NAME-suffixed), classpath cp, main class main. */
    static List<String> javaCommand(String name, String cp, String main) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            cmd.add(a.startsWith("-Dlog.file=") ? a.replaceAll("\\.log$", "") + "-" + name + ".log" : a);
        }
        cmd.add("-cp");
        cmd.add(cp);
        cmd.add(main);
        return cmd;
    }

    /**
     * The SQL client as sql-client.sh starts it (embedded mode, init file -i when not null), on
     * SQL_CLIENT_CLASSPATH: this JVM's classpath plus opt/'s flink-sql-client, flink-sql-gateway
     * and flink-python and lib/'s flink-json.
     */
    static List<String> sqlClientCommand(String name, String init) throws java.io.IOException {
        String cp = System.getenv("SQL_CLIENT_CLASSPATH");
        if (cp == null || cp.isEmpty()) throw new IllegalStateException("SQL_CLIENT_CLASSPATH is not set (scripts/flink-quickstart.sh sets it)");
        List<String> cmd = javaCommand("sqlclient-" + name, cp, "org.apache.flink.table.client.SqlClient");
        cmd.add("embedded");
        if (init != null) {
            cmd.add("-i");
            cmd.add(init);
        }
        cmd.add("-hist");
        cmd.add(flinkConf().resolve("history-" + name).toString());
        return cmd;
    }

    /** The file f with ${NAME}s replaced, written beside the Flink config: a SQL client's -i file. */
    static String initFile(String f, Map<String, String> vars) throws java.io.IOException {
        java.nio.file.Path out = flinkConf().resolve(Paths.get(f).getFileName());
        Files.write(out, subst(new String(Files.readAllBytes(Paths.get(f)), StandardCharsets.UTF_8), vars).getBytes(StandardCharsets.UTF_8));
        return out.toString();
    }

    /** Runs one statement of the session; its rows when it has any. */
    static Result statement(Session s, String stmt) {
        long t0 = System.nanoTime();
        try {
            Result res = s.execute(stmt);
            report(true, stmt, res.what, t0, null);
            String upper = stmt.toUpperCase(Locale.ROOT);
            if (res.rows != null && (upper.startsWith("SELECT") || upper.startsWith("SHOW"))) {
                for (int i = 0; i < Math.min(res.rows.size(), 3); i++) System.out.println("        | " + String.join(" | ", res.rows.get(i)));
            }
            return res;
        } catch (Throwable e) {
            report(false, stmt, null, t0, describe(e));
            return new Result();
        }
    }

    /** -- @expect: each check of the previous statement's rows. */
    static void check(Result r, Result before, String spec) {
        long t0 = System.nanoTime();
        String label = "(expect " + spec + ")";
        if (r == null || r.rows == null) {
            report(false, label, null, t0, "the statement before has no rows to check");
            return;
        }
        List<String> bad = new ArrayList<>();
        for (String c : spec.split("\\s+")) {
            int eq = c.indexOf('=');
            String k = c.substring(0, eq), v = c.substring(eq + 1);
            switch (k) {
                case "rows":
                    if (r.rows.size() != Integer.parseInt(v)) bad.add(r.rows.size() + " rows, want " + v);
                    break;
                case "count":
                    if (r.rows.size() != 1 || !r.rows.get(0).get(r.rows.get(0).size() - 1).equals(v)) bad.add("got " + r.rows + ", want count " + v);
                    break;
                case "notnull":
                    for (String col : v.split(",")) {
                        int i = column(r, col, bad);
                        for (List<String> row : r.rows) if (i >= 0 && row.get(i).equals("NULL")) bad.add(col + " is NULL in " + row);
                    }
                    break;
                case "same":
                    if (before == null || before.rows == null) bad.add("no rows of the statement before to compare with");
                    else if (!r.rows.equals(before.rows)) bad.add("rows " + r.rows + ", the statement before had " + before.rows);
                    break;
                default:
                    if (k.startsWith("last.")) {
                        int j = column(r, k.substring(5), bad);
                        List<String> lastRow = r.rows.isEmpty() ? null : r.rows.get(r.rows.size() - 1);
                        if (lastRow == null) bad.add("no rows");
                        else if (j >= 0 && !lastRow.get(j).equals(v)) bad.add(k + " is " + lastRow.get(j) + ", want " + v);
                        break;
                    }
                    int i = column(r, k, bad);
                    for (List<String> row : r.rows) if (i >= 0 && !row.get(i).equals(v)) bad.add(k + " is " + row.get(i) + ", want " + v);
            }
        }
        report(bad.isEmpty(), label, "held", t0, String.join("; ", bad));
    }

    static int column(Result r, String col, List<String> bad) {
        int i = r.cols.indexOf(col);
        if (i < 0) bad.add("no column " + col + " in " + r.cols);
        return i;
    }

    /** -- @await T=N ...: a second session in batch mode counts each table until it holds N rows. */
    static void await(Session main, String spec) {
        long t0 = System.nanoTime();
        Map<String, Long> want = new LinkedHashMap<>(), have = new LinkedHashMap<>();
        for (String kv : spec.split("\\s+")) {
            String[] p = kv.split("=");
            want.put(p[0], Long.parseLong(p[1]));
            have.put(p[0], -1L);
        }
        String error = null;
        boolean done = false;
        try (Session obs = main.observer()) {
            while (!done && (System.nanoTime() - t0) / 1e9 < AWAIT_S) {
                done = true;
                for (Map.Entry<String, Long> e : want.entrySet()) {
                    if (have.get(e.getKey()) >= e.getValue()) continue;
                    try {
                        have.put(e.getKey(), Long.parseLong(obs.execute("SELECT COUNT(*) FROM " + e.getKey()).rows.get(0).get(0)));
                        error = null;
                    } catch (Throwable t) {
                        error = describe(t);
                    }
                    if (have.get(e.getKey()) < e.getValue()) done = false;
                }
                if (!done) sleep(1000);
            }
        } catch (Throwable t) {
            error = "the second session: " + describe(t);
        }
        report(done, "(await " + spec + ")", "counts " + have, t0,
                "counts " + have + " after " + AWAIT_S + " s" + (error == null ? "" : "; last error: " + error));
    }

    /** -- @until N SQL: a second session in batch mode repeats SQL until its first row's last column is >= N. */
    static void until(Session main, String spec) {
        long t0 = System.nanoTime();
        int sp = spec.indexOf(' ');
        long want = Long.parseLong(spec.substring(0, sp));
        String sql = spec.substring(sp + 1).trim();
        long have = -1;
        String error = null;
        try (Session obs = main.observer()) {
            while (have < want && (System.nanoTime() - t0) / 1e9 < AWAIT_S) {
                try {
                    List<String> first = obs.execute(sql).rows.get(0);
                    have = Long.parseLong(first.get(first.size() - 1));
                    error = null;
                } catch (Throwable t) {
                    error = describe(t);
                }
                if (have < want) sleep(1000);
            }
        } catch (Throwable t) {
            error = "the second session: " + describe(t);
        }
        report(have >= want, "(until " + want + " <= " + sql + ")", "got " + have, t0,
                "got " + have + " after " + AWAIT_S + " s" + (error == null ? "" : "; last error: " + error));
    }

    /** -- @flink-run ARGS: Flink's CliFrontend "run ARGS" in a new JVM against this MiniCluster. */
    static void flinkRun(String args) {
        long t0 = System.nanoTime();
        String label = "(flink run " + args + ")";
        try {
            List<String> cmd = javaCommand("flink-run", System.getProperty("java.class.path"), "org.apache.flink.client.cli.CliFrontend");
            cmd.add("run");
            cmd.addAll(java.util.Arrays.asList(args.split("\\s+")));
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
            pb.environment().put("FLINK_CONF_DIR", flinkConf().toString());
            Process p = pb.start();
            StringBuilder out = new StringBuilder();
            String jobId = null;
            try (java.io.BufferedReader r = new java.io.BufferedReader(
                    new java.io.InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    out.append(line).append('\n');
                    Matcher m = Pattern.compile("(?i)job ?id(?: is)? ?:? ?([0-9a-f]{32})").matcher(line);
                    if (m.find()) jobId = m.group(1);
                }
            }
            if (!p.waitFor(STATEMENT_S, TimeUnit.SECONDS)) p.destroyForcibly();
            int rc = p.exitValue();
            if (rc != 0 || jobId == null) {
                String o = out.toString().replaceAll("\\s+", " ");
                report(false, label, null, t0, "flink run exited " + rc + ": " + (o.length() > 1500 ? o.substring(o.length() - 1500) : o));
            } else {
                report(true, label, "job " + jobId, t0, null);
            }
        } catch (Throwable e) {
            report(false, label, null, t0, describe(e));
        }
    }

    static List<List<String>> collect(TableResult r, Optional<JobClient> job) throws Exception {
        Future<List<List<String>>> f = POOL.submit(() -> {
            List<List<String>> out = new ArrayList<>();
            try (CloseableIterator<Row> it = r.collect()) {
                while (it.hasNext()) {
                    Row row = it.next();
                    List<String> vals = new ArrayList<>();
                    for (int i = 0; i < row.getArity(); i++) vals.add(row.getField(i) == null ? "NULL" : row.getField(i).toString());
                    out.add(vals);
                }
            }
            return out;
        });
        try {
            return f.get(STATEMENT_S, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            job.ifPresent(JobClient::cancel);
            throw new TimeoutException("no complete result after " + STATEMENT_S + " s; the job was cancelled");
        } catch (java.util.concurrent.ExecutionException e) {
            throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
    }

    /** Cancels every job not finished yet and waits until each has ended; how many. */
    static int cancelAll() throws Exception {
        Configuration c = new Configuration();
        c.set(RestOptions.ADDRESS, rest.getHost());
        c.set(RestOptions.PORT, rest.getPort());
        int n = 0;
        try (RestClusterClient<StandaloneClusterId> rc = new RestClusterClient<>(c, StandaloneClusterId.getInstance())) {
            for (JobStatusMessage j : rc.listJobs().get(10, TimeUnit.SECONDS)) {
                if (j.getJobState().isGloballyTerminalState()) continue;
                rc.cancel(j.getJobId()).get(60, TimeUnit.SECONDS);
                for (int i = 0; i < 240 && !rc.getJobStatus(j.getJobId()).get(10, TimeUnit.SECONDS).isGloballyTerminalState(); i++) sleep(250);
                n++;
            }
        }
        return n;
    }

    static void report(boolean ok, String stmt, String what, long t0, String error) {
        step++;
        double s = (System.nanoTime() - t0) / 1e9;
        String one = stmt.replaceAll("\\s+", " ").trim();
        if (one.length() > 100) one = one.substring(0, 100) + "...";
        if (ok) System.out.printf(Locale.ROOT, "ok    %2d  %s  (%s, %.1f s)%n", step, one, what, s);
        else System.out.printf(Locale.ROOT, "error %2d  %s: %s%n", step, one, error);
        System.out.flush();
        allOk &= ok;
    }

    /** Statements end with ';' at a line end (EXECUTE STATEMENT SET at END;); "-- @" lines are directives. */
    static List<String> split(String script) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        for (String line : script.split("\n")) {
            String t = line.trim();
            if (cur.length() == 0 && t.startsWith("-- @")) {
                out.add(t);
                continue;
            }
            if (t.startsWith("--") || (t.isEmpty() && cur.length() == 0)) continue;
            cur.append(line).append('\n');
            String sofar = cur.toString().trim();
            boolean block = sofar.toUpperCase(Locale.ROOT).startsWith("EXECUTE STATEMENT SET");
            if (block ? t.equalsIgnoreCase("END;") : t.endsWith(";")) {
                out.add(sofar.substring(0, sofar.length() - 1).trim());
                cur.setLength(0);
            }
        }
        if (cur.toString().trim().length() > 0) out.add(cur.toString().trim());
        return out;
    }

    static String subst(String s, Map<String, String> vars) {
        Matcher m = Pattern.compile("\\$\\{([A-Z_]+)}").matcher(s);
        StringBuilder b = new StringBuilder();
        while (m.find()) {
            String v = vars.get(m.group(1));
            if (v == null) throw new IllegalArgumentException("${" + m.group(1) + "} in the SQL: no such environment variable");
            m.appendReplacement(b, Matcher.quoteReplacement(v));
        }
        return m.appendTail(b).toString();
    }

    static String describe(Throwable e) {
        StringBuilder b = new StringBuilder();
        java.util.Set<Throwable> seen = new java.util.HashSet<>();
        for (Throwable c = e; c != null && seen.add(c) && seen.size() <= 8; c = c.getCause()) {
            String msg = c.getMessage() == null ? "" : c.getMessage();
            int nl = msg.indexOf('\n');
            if (nl >= 0 && c.getCause() != null) msg = msg.substring(0, nl);
            if (b.length() > 0) b.append(" | caused by ");
            b.append(c.getClass().getName()).append(": ").append(msg.length() > 500 ? msg.substring(0, 500) + "..." : msg);
        }
        return b.toString();
    }

    static int envInt(String k, int d) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? d : Integer.parseInt(v);
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
