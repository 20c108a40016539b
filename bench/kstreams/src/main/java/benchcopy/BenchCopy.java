package benchcopy;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * The Kafka Streams baseline of `make bench`: by default copies every
 * record of the input topics to the output topic, exactly once
 * (exactly_once_v2), with ByteArray serdes and an identity topology,
 * stream(inputs).to(output); or runs one of the stateful rows' topologies.
 * Every other setting is Kafka Streams' default: one stream thread,
 * auto.offset.reset=earliest, output records keep the input record's
 * timestamp.
 *
 * <pre>
 * java -jar kstreams-bench.jar BOOTSTRAP APPLICATION_ID IN1[,IN2...] OUT COMMIT_INTERVAL_MS STATE_DIR [TOPOLOGY [THREADS [TABLE]]]
 * </pre>
 *
 * TOPOLOGY is identity (the default), or one of the stateful rows'
 * counterparts in {@link Topologies}: count, sum, dedupe, join (join
 * reads the customers table from the topic TABLE). THREADS is
 * num.stream.threads (default 1). The stateful topologies run with
 * statestore.cache.max.bytes=0, so that, as the processor does, every
 * input emits its update (with the record cache, updates of one key
 * between two commits are folded into one output).
 *
 * With the system property bench.instance.id set (-Dbench.instance.id=ID)
 * its consumers are static group members (group.instance.id, which Kafka
 * Streams suffixes with each stream thread's index), so that a restart
 * after a crash gets its tasks back at once instead of after the session
 * timeout. Each store partition's restore is printed to stderr when it
 * ends ("BenchCopy: restored N records of STORE partition P in MS ms").
 *
 * SIGTERM closes it cleanly (exit 0); an error in a stream thread, or the
 * client going to ERROR, exits 1.
 */
public final class BenchCopy {
    private BenchCopy() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 6 || args.length > 9) {
            System.err.println("usage: BenchCopy BOOTSTRAP APPLICATION_ID IN1[,IN2...] OUT COMMIT_INTERVAL_MS STATE_DIR [TOPOLOGY [THREADS [TABLE]]]");
            System.exit(2);
        }
        String topology = args.length > 6 ? args[6] : "identity";
        int threads = args.length > 7 ? Integer.parseInt(args[7]) : 1;
        List<String> inputs = Arrays.asList(args[2].split(","));
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(args[4]));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[5]); // the RocksDB stores of the stateful topologies
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);

        String instance = System.getProperty("bench.instance.id", "");
        if (!instance.isEmpty()) {
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), instance);
        }

        StreamsBuilder b = new StreamsBuilder();
        switch (topology) {
            case "identity" -> Topologies.identity(b, inputs, args[3]);
            case "count", "sum" -> Topologies.aggregate(b, inputs, args[3], topology.equals("sum"));
            case "dedupe" -> Topologies.dedupe(b, inputs, args[3]);
            case "join" -> {
                if (args.length < 9) {
                    System.err.println("BenchCopy: the join topology needs TABLE, the customers topic");
                    System.exit(2);
                }
                Topologies.join(b, inputs, args[3], args[8]);
            }
            default -> {
                System.err.println("BenchCopy: unknown topology " + topology + " (identity, count, sum, dedupe or join)");
                System.exit(2);
            }
        }
        if (!topology.equals("identity")) {
            p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        }

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setGlobalStateRestoreListener(new Restores());
        CountDownLatch stopped = new CountDownLatch(1);
        int[] code = {0};
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("BenchCopy: stream thread failed: " + e);
            code[0] = 1;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            System.err.println("BenchCopy: state " + before + " -> " + now);
            if (now == KafkaStreams.State.ERROR) {
                code[0] = 1;
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
        if (code[0] != 0) {
            streams.close(Duration.ofSeconds(5));
            System.exit(code[0]);
        }
    }

    /** Prints each store partition's restore when it ends, with its record count and time. */
    static final class Restores implements StateRestoreListener {
        private final java.util.Map<TopicPartition, Long> began = new java.util.concurrent.ConcurrentHashMap<>();

        @Override
        public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            began.put(tp, System.nanoTime());
            System.err.println("BenchCopy: restoring " + store + " partition " + tp.partition() + " from " + start + " to " + end);
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

        @Override
        public void onRestoreEnd(TopicPartition tp, String store, long total) {
            Long t0 = began.remove(tp);
            long ms = t0 == null ? -1 : (System.nanoTime() - t0) / 1_000_000;
            System.err.println("BenchCopy: restored " + total + " records of " + store + " partition " + tp.partition() + " in " + ms + " ms");
        }
    }
}
