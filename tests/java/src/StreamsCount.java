import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams application with exactly-once v2: re-key, repartition, count, output.
 *
 * <pre>
 * java StreamsCount BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR REPLICATION THREADS
 * </pre>
 * INPUT holds String records whose value names a key ("k07"); the record key is anything.
 * The topology re-keys each record by its value (selectKey), repartitions (groupByKey through
 * the internal topic APP_ID-by-key-repartition), counts per key in the changelog-backed
 * store "counts" (changelog APP_ID-counts-changelog) and writes every new count to OUTPUT
 * (String key, Long value). The record cache is off, so each input record yields exactly one
 * output record: under exactly-once the committed output of a key is 1, 2, ..., n.
 *
 * <p>REPLICATION is the internal topics' replication factor (-1: the broker's default).
 * Runs until SIGTERM (closes cleanly, prints "CLOSED") or SIGKILL. Prints "STATE a->b" on
 * each state change, "PROCESSED n" now and then, and "UNCAUGHT ..." for an exception that
 * killed a stream thread (which is then replaced). A JVM option -Dstreams.NAME=VALUE sets any
 * Streams config NAME (e.g. -Dstreams.group.protocol=streams).
 */
public final class StreamsCount {
    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println(
                "usage: StreamsCount BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR REPLICATION THREADS");
            System.exit(2);
        }
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        String stateDir = args[4];
        int replication = Integer.parseInt(args[5]);
        int threads = Integer.parseInt(args[6]);

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, replication);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // DeleteRecords on the repartition topic up to the committed offsets, every second.
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        // Fail over within seconds once an instance is gone (the test kills one).
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);
        // -Dstreams.<config>=<value> adds or overrides any Streams config (for experiments).
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("streams.")) {
                props.put(name.substring("streams.".length()), System.getProperty(name));
            }
        }

        StreamsBuilder builder = new StreamsBuilder();
        AtomicLong processed = new AtomicLong();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((k, v) -> v)
            .groupByKey(Grouped.with("by-key", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .peek((k, v) -> {
                long n = processed.incrementAndGet();
                if (n % 500 == 0) {
                    System.out.println("PROCESSED " + n);
                }
            })
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> System.out.println("STATE " + before + "->" + now));
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e);
            e.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean ok = streams.close(Duration.ofSeconds(30));
            System.out.println(ok ? "CLOSED" : "CLOSE TIMED OUT");
            System.out.flush();
            closed.countDown();
        }));
        System.out.println("kafka-streams " + clientsVersion() + " " + appId);
        System.out.flush();
        streams.start();
        closed.await();
    }

    /** kafka-clients' version: its AppInfoParser moved to common.utils.internals in 4.4. */
    private static String clientsVersion() {
        for (String name : new String[] {"org.apache.kafka.common.utils.internals.AppInfoParser",
                                         "org.apache.kafka.common.utils.AppInfoParser"}) {
            try {
                return (String) Class.forName(name).getMethod("getVersion").invoke(null);
            } catch (ReflectiveOperationException e) {
                // not in this version: the other name
            }
        }
        return "unknown";
    }
}
