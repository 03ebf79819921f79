import java.time.Duration;
import java.util.Random;
import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.ScanRecord;
import org.apache.fluss.client.table.scanner.log.LogScanner;
import org.apache.fluss.client.table.scanner.log.ScanRecords;
import org.apache.fluss.client.table.writer.AppendWriter;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.BinaryString;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.types.DataTypes;

/**
 * A measurement, not a check (check.sh runs it with FLUSS_CHECKS=FlussProjectedScan): the real
 * Fluss 0.9.1 client appends ROWS (args[1], default 100000) rows of an INT and 8 STRING columns of
 * 100 random letters to a 1-bucket log table, then scans only the INT column from the beginning
 * three times (projection pushed down), printing for each the polls it took and the time. With
 * max-poll-records lifted, a poll is about one FETCH_LOG answer, so the polls show how many rows a
 * projected fetch fills (fluss/DESIGN.md, FETCH_LOG). It checks the sum of the ids and prints PASS.
 */
public class FlussProjectedScan {
    public static void main(String[] args) throws Exception {
        int rows = args.length > 1 ? Integer.parseInt(args[1]) : 100000;
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", args[0]);
        conf.setString("client.scanner.log.max-poll-records", "1000000");
        TablePath path = TablePath.of("fluss", "projected_scan");
        try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
            Schema.Builder sb = Schema.newBuilder().column("id", DataTypes.INT());
            for (int i = 0; i < 8; i++) sb.column("s" + i, DataTypes.STRING());
            admin.dropTable(path, true).get();
            admin.createTable(path, TableDescriptor.builder().schema(sb.build()).distributedBy(1).build(), false).get();
            Random rnd = new Random(1);
            try (Table table = c.getTable(path)) {
                AppendWriter w = table.newAppend().createWriter();
                long t0 = System.nanoTime();
                for (int i = 0; i < rows; i++) {
                    Object[] f = new Object[9];
                    f[0] = i;
                    for (int j = 1; j < 9; j++) {
                        char[] s = new char[100];
                        for (int k = 0; k < 100; k++) s[k] = (char) ('a' + rnd.nextInt(26));
                        f[j] = BinaryString.fromString(new String(s));
                    }
                    w.append(GenericRow.of(f));
                }
                w.flush();
                System.out.printf("appended %d rows in %.2f s%n", rows, (System.nanoTime() - t0) / 1e9);
                for (int round = 0; round < 3; round++) {
                    try (LogScanner s = table.newScan().project(new int[] {0}).createLogScanner()) {
                        s.subscribeFromBeginning(0);
                        long n = 0, sum = 0, polls = 0, nonEmpty = 0;
                        long t1 = System.nanoTime();
                        while (n < rows) {
                            ScanRecords recs = s.poll(Duration.ofSeconds(1));
                            polls++;
                            if (!recs.isEmpty()) nonEmpty++;
                            for (ScanRecord r : recs) { n++; sum += r.getRow().getInt(0); }
                        }
                        if (sum != (long) rows * (rows - 1) / 2) throw new AssertionError("sum " + sum);
                        System.out.printf("projected scan of id: %d rows, %d polls (%d with rows), %.3f s%n", n, polls, nonEmpty, (System.nanoTime() - t1) / 1e9);
                    }
                }
            }
            admin.dropTable(path, false).get();
        }
        System.out.println("PASS");
    }
}
