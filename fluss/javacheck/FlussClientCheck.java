import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.config.Configuration;

/**
 * Connects the real Fluss 0.9.1 Java client to a Strom node's fluss.listen and prints what
 * happens (check.sh reads it). The client sends API_VERSIONS, then GET_METADATA; while Strom
 * serves only API_VERSIONS the second answers UNSUPPORTED_VERSION naming GET_METADATA.
 */
public class FlussClientCheck {
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", args[0]);
        try (Connection c = ConnectionFactory.createConnection(conf)) {
            System.out.println("databases: " + c.getAdmin().listDatabases().get());
        } catch (Throwable t) {
            for (Throwable x = t; x != null; x = x.getCause()) {
                System.out.println("caught: " + x.getClass().getName() + ": " + x.getMessage());
            }
        }
    }
}
