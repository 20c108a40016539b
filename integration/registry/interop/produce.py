#!/usr/bin/env python3
"""produce.py: write records to a Kafka topic with Confluent's own
AvroSerializer, ProtobufSerializer or JSONSerializer, which register the schema under
the subject of --strategy (<topic>-value by default).

Records come from stdin, one JSON object a line: {"key": "k", "value":
{...}, "headers": {"name": "text"}}, the key a plain string (optional),
the value the record of the schema in its JSON form (Protobuf: as
json_format.ParseDict takes it), the headers optional. A line may name
its own "schema_file" and "message" (a topic carrying several record
types); --strategy names the subjects the serializer registers them
under (topic: <topic>-value; record, topic_record as Confluent's
record_subject_name_strategy and topic_record_subject_name_strategy).

  produce.py --brokers 127.0.0.1:19092 --registry URL --topic T \\
      --format avro --schema-file order.avsc [--count N] [--transactional] < records.jsonl

--count N: produce the first N lines and fail when there are fewer.
--transactional: all records in one Kafka transaction, committed at the end.
Exit 0 once every record is acknowledged (and the transaction committed).
"""

import json
import sys
import uuid

from confluent_kafka import KafkaException, Producer
from confluent_kafka.serialization import MessageField, SerializationContext

import common


def serializer(args, schema_file, message):
    """A function of (value dict, topic) to the record's value bytes, with
    the schema of schema_file (and Protobuf message) under --strategy."""
    client = common.registry(args)
    conf = {"subject.name.strategy": common.STRATEGIES[args.strategy]}
    if args.format == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        ser = AvroSerializer(client, common.avro_schema(schema_file), conf=conf)
        return lambda v, topic: ser(v, SerializationContext(topic, MessageField.VALUE))
    if args.format == "json_schema":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        text = common.avro_schema(schema_file, "--format json_schema needs --schema-file (a JSON schema) to produce")
        ser = JSONSerializer(text, client, conf=conf)
        return lambda v, topic: ser(v, SerializationContext(topic, MessageField.VALUE))
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import json_format

    cls = common.protobuf_class(schema_file, message)
    ser = ProtobufSerializer(cls, client, {"use.deprecated.format": False, **conf})
    return lambda v, topic: ser(json_format.ParseDict(v, cls()), SerializationContext(topic, MessageField.VALUE))


def serializers(args):
    """A function of (record, topic) to the record's value bytes: with the
    record's own "schema_file" and "message" when it names them (a topic
    carrying several record types), else those of the arguments; one
    serializer per schema, made on first use."""
    made = {}

    def to_bytes(rec, topic):
        which = (rec.get("schema_file") or args.schema_file, rec.get("message") or args.message)
        if which not in made:
            made[which] = serializer(args, *which)
        return made[which](rec["value"], topic)

    return to_bytes


def read_records(count):
    """The records of stdin (the first count, when count is set)."""
    records = []
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        if count is not None and len(records) == count:
            break
        try:
            rec = json.loads(line)
        except ValueError as e:
            common.fail(f"stdin line {n} is not JSON: {e}")
        if not isinstance(rec, dict) or "value" not in rec:
            common.fail(f'stdin line {n}: want {{"key": ..., "value": {{...}}}}')
        records.append(rec)
    if count is not None and len(records) < count:
        common.fail(f"--count {count} but stdin had {len(records)} records")
    return records


def main():
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--transactional", action="store_true", help="write in one transaction")
    args = p.parse_args()
    records = read_records(args.count)
    to_bytes = serializers(args)
    conf = {"bootstrap.servers": args.brokers, "enable.idempotence": True, "acks": "all"}
    if args.transactional:
        conf["transactional.id"] = f"interop-produce-{uuid.uuid4()}"
    producer = Producer(conf)
    errors = []

    def delivered(err, _msg):
        if err is not None:
            errors.append(err)

    try:
        if args.transactional:
            producer.init_transactions(args.timeout)
            producer.begin_transaction()
        for rec in records:
            key = rec.get("key")
            headers = [(k, str(v).encode("utf-8")) for k, v in (rec.get("headers") or {}).items()]
            producer.produce(args.topic, key=None if key is None else str(key).encode("utf-8"),
                             value=to_bytes(rec, args.topic), headers=headers or None,
                             on_delivery=delivered)
            producer.poll(0)
        if args.transactional:
            producer.commit_transaction(args.timeout)
        left = producer.flush(args.timeout)
    except KafkaException as e:
        common.fail(f"producing to {args.topic}: {e}")
    if left:
        common.fail(f"{left} records not acknowledged within {args.timeout}s")
    if errors:
        common.fail(f"{len(errors)} records failed, the first: {errors[0]}")
    print(f"produce.py: {len(records)} records to {args.topic}", file=sys.stderr)


if __name__ == "__main__":
    main()
