import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An exactly-once copier (compiles against kafka-clients 3.9 and 4.x): a read_committed
 * consumer of one input partition, a transactional producer writing "copy:VALUE" to the same
 * partition of the output topic, the input offsets committed in each transaction
 * (sendOffsetsToTransaction). It starts at the group's committed offset.
 *
 * <pre>java TxnCopier BOOTSTRAP SRC DST PARTITION GROUP TRANSACTIONAL_ID RECORDS ABORT_EVERY PACE_MS</pre>
 * Every ABORT_EVERY-th transaction writes "aborted:ID:RUN:N:VALUE" instead and is aborted on
 * purpose; the batch is then copied again. The history on stdout, one JSON object a line
 * (read by tests/cluster/test_mixed_txn_clients.py): {"txn": N, "writes": [[partition,
 * offset or null, value], ...]} before the commit or abort, then {"txn": N, "outcome": "ok",
 * "progress": records} or {"txn": N, "outcome": "aborted"}; {"done": true} once RECORDS
 * are copied. Any error ends the process with exit 1 (its open transaction's outcome unknown).
 */
public final class TxnCopier {
    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], src = args[1], dst = args[2];
        int partition = Integer.parseInt(args[3]);
        String group = args[4], txnId = args[5];
        long records = Long.parseLong(args[6]);
        int abortEvery = Integer.parseInt(args[7]);
        long paceMs = Long.parseLong(args[8]);
        String run = Long.toString(ProcessHandle.current().pid());

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10");
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        TopicPartition in = new TopicPartition(src, partition);
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
        KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
        int txn = 0;
        List<String> values = new ArrayList<>();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try {
            producer.initTransactions();
            consumer.assign(List.of(in));
            while (true) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                if (batch.isEmpty()) {
                    if (consumer.position(in) >= records) {
                        emit("{\"done\": true}");
                        break;
                    }
                    continue;
                }
                txn++;
                boolean abort = txn % abortEvery == 0;
                long first = -1, last = -1;
                values.clear();
                sent.clear();
                producer.beginTransaction();
                for (ConsumerRecord<String, String> r : batch) {
                    first = first < 0 ? r.offset() : first;
                    last = r.offset();
                    String v = abort ? "aborted:" + txnId + ":" + run + ":" + txn + ":" + r.value()
                                     : "copy:" + r.value();
                    values.add(v);
                    sent.add(producer.send(new ProducerRecord<>(dst, partition, null, v)));
                }
                producer.flush();
                emitWrites(txn, partition, values, sent);
                if (abort) {
                    producer.abortTransaction();
                    emit("{\"txn\": " + txn + ", \"outcome\": \"aborted\"}");
                    consumer.seek(in, first);
                } else {
                    producer.sendOffsetsToTransaction(
                        Map.of(in, new OffsetAndMetadata(last + 1)), consumer.groupMetadata());
                    producer.commitTransaction();
                    emit("{\"txn\": " + txn + ", \"outcome\": \"ok\", \"progress\": "
                         + values.size() + "}");
                }
                Thread.sleep(paceMs);
            }
        } catch (Exception e) {
            if (!values.isEmpty()) {
                emitWrites(txn, partition, values, sent);
            }
            System.err.println("copier failed: " + e);
            System.err.flush();
            Runtime.getRuntime().halt(1);
        }
        producer.close(Duration.ofSeconds(5));
        consumer.close(Duration.ofSeconds(5));
    }

    static void emitWrites(int txn, int partition, List<String> values,
                           List<Future<RecordMetadata>> sent) {
        StringBuilder sb = new StringBuilder("{\"txn\": " + txn + ", \"writes\": [");
        for (int i = 0; i < values.size(); i++) {
            String offset = "null";
            Future<RecordMetadata> f = sent.get(i);
            if (f.isDone()) {
                try {
                    offset = Long.toString(f.get().offset());
                } catch (Exception e) {
                    offset = "null";
                }
            }
            sb.append(i == 0 ? "" : ", ").append("[").append(partition).append(", ")
              .append(offset).append(", \"").append(values.get(i)).append("\"]");
        }
        emit(sb.append("]}").toString());
    }
}
