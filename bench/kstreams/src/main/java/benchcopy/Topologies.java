package benchcopy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueBytesStoreSupplier;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The topologies of bench/kstreams, each the Kafka Streams form of one
 * processor row of `make bench` on the same JSON orders
 * ({"order_id":"o-N","customer":"customer-K","amount_cents":...}, keyed
 * by customer). Values are parsed with Jackson's ObjectMapper, as a JSON
 * serde would; the stateful ones keep RocksDB stores (Kafka Streams'
 * default) with their changelogs (also the default).
 */
final class Topologies {
    private Topologies() {}

    private static final ObjectMapper JSON = new ObjectMapper();

    static JsonNode parse(byte[] v) {
        try {
            return JSON.readTree(v);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static byte[] write(JsonNode n) {
        try {
            return JSON.writeValueAsBytes(n);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {"key":KEY,"value":N}, the form of the processor's aggregate output. */
    static byte[] keyValue(String key, long n) {
        ObjectNode o = JSON.createObjectNode();
        o.put("key", key);
        o.put("value", n);
        return write(o);
    }

    static KStream<byte[], byte[]> orders(StreamsBuilder b, List<String> inputs) {
        return b.stream(inputs, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()));
    }

    /** stream(inputs).to(out): BenchCopy's identity. */
    static void identity(StreamsBuilder b, List<String> inputs, String out) {
        orders(b, inputs).to(out, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
    }

    /**
     * groupBy(.customer) through the repartition topic
     * &lt;app&gt;-by-customer-repartition, then count() (sum == false) or the
     * sum of .amount_cents (sum == true) in the RocksDB store "aggregate"
     * with its changelog; every update to the output as {"key":...,"value":N}.
     */
    static void aggregate(StreamsBuilder b, List<String> inputs, String out, boolean sum) {
        KeyValueBytesStoreSupplier store = Stores.persistentKeyValueStore("aggregate");
        KStream<String, byte[]> byCustomer = orders(b, inputs)
                .selectKey((k, v) -> parse(v).path("customer").asText());
        var grouped = byCustomer.groupByKey(Grouped.with("by-customer", Serdes.String(), Serdes.ByteArray()));
        KTable<String, Long> table;
        if (sum) {
            table = grouped.aggregate(() -> 0L, (k, v, acc) -> acc + parse(v).path("amount_cents").asLong(),
                    Materialized.<String, Long>as(store).withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()));
        } else {
            table = grouped.count(Materialized.<String, Long>as(store).withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()));
        }
        table.toStream().mapValues((k, n) -> keyValue(k, n))
                .to(out, Produced.with(Serdes.String(), Serdes.ByteArray()));
    }

    /**
     * selectKey(.order_id) through the repartition topic
     * &lt;app&gt;-by-order-id-repartition, then a processor with the RocksDB
     * store "dedupe" (order id to the timestamp of its first sighting, with
     * its changelog): a record whose id is in the store is dropped, any
     * other is stored and forwarded unchanged (keyed by its order id).
     */
    static void dedupe(StreamsBuilder b, List<String> inputs, String out) {
        b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("dedupe"), Serdes.String(), Serdes.Long()));
        orders(b, inputs)
                .selectKey((k, v) -> parse(v).path("order_id").asText())
                .repartition(Repartitioned.<String, byte[]>as("by-order-id").withKeySerde(Serdes.String()).withValueSerde(Serdes.ByteArray()))
                .process(Dedupe::new, "dedupe")
                .to(out, Produced.with(Serdes.String(), Serdes.ByteArray()));
    }

    /** The dedupe processor: the first record of each key passes. */
    static final class Dedupe implements Processor<String, byte[], String, byte[]> {
        private ProcessorContext<String, byte[]> ctx;
        private KeyValueStore<String, Long> seen;

        @Override
        public void init(ProcessorContext<String, byte[]> ctx) {
            this.ctx = ctx;
            this.seen = ctx.getStateStore("dedupe");
        }

        @Override
        public void process(Record<String, byte[]> r) {
            if (seen.get(r.key()) != null) {
                return;
            }
            seen.put(r.key(), r.timestamp());
            ctx.forward(r);
        }
    }

    /**
     * Each order joined with the customers table (the topic table, keyed
     * by customer like the orders, so co-partitioned: no repartition):
     * KStream.join(KTable) on the record key, the table in the RocksDB
     * store "customers" with its changelog; the output is the order with
     * the customer's row put in as .customer_row.
     */
    static void join(StreamsBuilder b, List<String> inputs, String out, String tableTopic) {
        KTable<Bytes, byte[]> customers = b.table(tableTopic, Consumed.with(Serdes.Bytes(), Serdes.ByteArray()),
                Materialized.<Bytes, byte[]>as(Stores.persistentKeyValueStore("customers"))
                        .withKeySerde(Serdes.Bytes()).withValueSerde(Serdes.ByteArray()));
        b.stream(inputs, Consumed.with(Serdes.Bytes(), Serdes.ByteArray()))
                .join(customers, (order, customer) -> {
                    ObjectNode o = (ObjectNode) parse(order);
                    o.set("customer_row", parse(customer));
                    return write(o);
                })
                .to(out, Produced.with(Serdes.Bytes(), Serdes.ByteArray()));
    }
}
