import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.TopicPartition;

/**
 * Admin.listOffsets with each OffsetSpec on one partition (kafka-clients 3.9 and 4.x).
 *
 * <pre>java ListOffsetSpecs BOOTSTRAP TOPIC PARTITION TIMESTAMP</pre>
 * Prints "SPEC name offset timestamp leaderEpoch" per spec (leaderEpoch -1 when absent), or
 * "SPEC name ERROR ExceptionClass" when the broker answers with an error.
 */
public final class ListOffsetSpecs {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        TopicPartition tp = new TopicPartition(args[1], Integer.parseInt(args[2]));
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
        specs.put("forTimestamp", OffsetSpec.forTimestamp(Long.parseLong(args[3])));
        specs.put("earliestLocal", OffsetSpec.earliestLocal());
        specs.put("latestTiered", OffsetSpec.latestTiered());

        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        try (Admin admin = Admin.create(props)) {
            for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
                ListOffsetsResult result = admin.listOffsets(Map.of(tp, spec.getValue()));
                try {
                    ListOffsetsResult.ListOffsetsResultInfo info =
                            result.partitionResult(tp).get(20, TimeUnit.SECONDS);
                    System.out.println("SPEC " + spec.getKey() + " " + info.offset() + " "
                            + info.timestamp() + " " + info.leaderEpoch().orElse(-1));
                } catch (ExecutionException e) {
                    System.out.println("SPEC " + spec.getKey() + " ERROR "
                            + e.getCause().getClass().getSimpleName());
                }
            }
        }
    }
}
