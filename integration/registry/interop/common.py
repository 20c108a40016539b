"""What produce.py and consume.py share: arguments, the registry client,
and Protobuf message classes compiled from a .proto file."""

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import warnings

# Authlib, which the registry client imports, warns about httpx on import
# (and turns its warnings on first, hence the import before the filter).
import authlib.deprecate  # noqa: E402,F401

warnings.filterwarnings("ignore", message="The httpx module is deprecated")

from confluent_kafka.schema_registry import (RegisteredSchema, Schema, SchemaRegistryClient,
                                             record_subject_name_strategy, topic_record_subject_name_strategy,
                                             topic_subject_name_strategy)
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FORMATS = ("avro", "protobuf", "json_schema")

# The subject name strategies of --strategy: Confluent's own functions.
STRATEGIES = {
    "topic": topic_subject_name_strategy,
    "record": record_subject_name_strategy,
    "topic_record": topic_record_subject_name_strategy,
}


def parser(description):
    """The arguments both scripts take."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--brokers", required=True, help="seed brokers, comma-separated")
    p.add_argument("--registry", required=True, help="Schema Registry base URL")
    p.add_argument("--topic", required=True)
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--schema-file", help="an .avsc (Avro), .proto (Protobuf) or .json (JSON Schema) file")
    p.add_argument("--message", help="Protobuf: the message's full name (default: the file's first)")
    p.add_argument("--proto-form", choices=("text", "descriptor"), default="text",
                   help="Protobuf: register the .proto file's text (the default), or what Confluent's serializer "
                        "registers itself: base64 FileDescriptorProtos, its imports as references")
    p.add_argument("--strategy", choices=tuple(STRATEGIES), default="topic",
                   help="the serde's subject.name.strategy: topic (the default, <topic>-value), record (the record "
                        "name) or topic_record (<topic>-<record name>)")
    p.add_argument("--count", type=int, help="how many records")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    return p


def fail(msg):
    """Print msg to stderr and exit 1."""
    print(f"{os.path.basename(sys.argv[0])}: {msg}", file=sys.stderr)
    sys.exit(1)


def registry(args):
    """A client of the registry of args (see TextProtoRegistry): it
    registers a Protobuf schema as the text of --schema-file with
    --proto-form text, as the serializer gives it with descriptor."""
    text = args.format == "protobuf" and args.proto_form == "text"
    return TextProtoRegistry({"url": args.registry}, args.schema_file if text else None)


def _protoc(include, name):
    """The FileDescriptorSet (imports first) of file name in folder include,
    compiled by grpcio-tools' protoc, or exit 1."""
    from grpc_tools import protoc  # only Protobuf needs it
    import importlib.resources

    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        rc = protoc.main(["protoc", f"-I{include}", f"-I{well_known}", "--include_imports",
                          f"--descriptor_set_out={out}", name])
        if rc != 0:
            fail(f"protoc could not compile {os.path.join(include, name)} (exit {rc})")
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    return fds


def protobuf_class(schema_file, message=None):
    """The message class of message (default: the first one) of the .proto
    schema_file, compiled with protoc (imports resolve beside it), built in
    a descriptor pool of its own."""
    if not schema_file:
        fail("--format protobuf needs --schema-file (a .proto file)")
    fds = _protoc(os.path.dirname(os.path.abspath(schema_file)), os.path.basename(schema_file))
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:  # dependencies first (--include_imports orders them)
        pool.Add(fd)
    target = fds.file[-1]
    if message is None:
        if not target.message_type:
            fail(f"{schema_file} defines no message")
        prefix = f"{target.package}." if target.package else ""
        message = prefix + target.message_type[0].name
    try:
        desc = pool.FindMessageTypeByName(message)
    except KeyError:
        fail(f"{schema_file} has no message {message}")
    return message_factory.GetMessageClass(desc)


class TextProtoRegistry(SchemaRegistryClient):
    """A registry client for Confluent's Protobuf serde against Apicurio
    Registry 3.3.3, which stores the base64 FileDescriptorProtos the
    serializer registers as given and answers them as given, but fails
    (HTTP 500, "Syntax error ... 1:1") when asked for them with
    ?format=serialized, as the deserializer asks for a schema and its
    references.

    With proto_file set, registering sends .proto text instead of the
    serializer's descriptors: for each file the serializer registers (the
    message's, and each file it imports as a reference), the text of the
    file of that name beside proto_file. Fetching a schema (by id, or a
    reference's version) with format=serialized, it asks without the
    format: a base64 descriptor comes back as the deserializer expects it,
    and .proto text is compiled with protoc into one, the texts of its
    references (fetched in turn) beside it. The serializer and
    deserializer are Confluent's, unchanged."""

    def __init__(self, conf, proto_file=None):
        super().__init__(conf)
        self._dir = os.path.dirname(os.path.abspath(proto_file)) if proto_file else None

    def _as_text(self, schema):
        if schema.schema_type != "PROTOBUF" or self._dir is None or "syntax" in schema.schema_str:
            return schema
        fd = descriptor_pb2.FileDescriptorProto()
        fd.ParseFromString(base64.standard_b64decode(schema.schema_str))
        path = os.path.join(self._dir, fd.name)
        try:
            with open(path, encoding="utf-8") as f:
                return Schema(f.read(), "PROTOBUF", schema.references)
        except OSError as e:
            fail(f"the text of {fd.name}, which the serializer registers: {e}")

    def register_schema_full_response(self, subject_name, schema, normalize_schemas=False):
        return super().register_schema_full_response(subject_name, self._as_text(schema), normalize_schemas)

    def register_schema(self, subject_name, schema, normalize_schemas=False):
        return super().register_schema(subject_name, self._as_text(schema), normalize_schemas)

    def lookup_schema(self, subject_name, schema, normalize_schemas=False, fmt=None, deleted=False):
        return super().lookup_schema(subject_name, self._as_text(schema), normalize_schemas, None, deleted)

    def get_schema(self, schema_id, subject_name=None, fmt=None, reference_format=None):
        schema = super().get_schema(schema_id, subject_name, None, reference_format)
        if fmt != "serialized":
            return schema
        return self._serialized(schema)

    def get_version(self, subject_name, version="latest", deleted=False, fmt=None):
        r = super().get_version(subject_name, version, deleted, None)
        if fmt != "serialized":
            return r
        return RegisteredSchema(subject=r.subject, version=r.version, schema_id=r.schema_id, guid=r.guid,
                                schema=self._serialized(r.schema))

    def _serialized(self, schema):
        """schema as format=serialized gives it: a Protobuf schema's base64
        descriptor, compiled with protoc when the registry holds its text."""
        if schema.schema_type != "PROTOBUF" or "syntax" not in schema.schema_str:
            return schema
        main = "interop-registry-schema.proto"
        with tempfile.TemporaryDirectory() as tmp:
            self._write_imports(schema.references, tmp, set())
            with open(os.path.join(tmp, main), "w", encoding="utf-8") as f:
                f.write(schema.schema_str)
            fd = _protoc(tmp, main).file[-1]
        return Schema(base64.standard_b64encode(fd.SerializeToString()).decode("ascii"), "PROTOBUF", schema.references)

    def _write_imports(self, refs, folder, seen):
        """Writes the .proto text of each reference (and theirs) into folder
        under its reference name, the path it is imported by."""
        for ref in refs or []:
            if ref.name in seen:
                continue
            seen.add(ref.name)
            text = super().get_version(ref.subject, ref.version, True, None).schema
            if "syntax" not in text.schema_str:
                fail(f"reference {ref.name} is a descriptor under .proto text; interop compiles texts alone")
            path = os.path.join(folder, ref.name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.schema_str)
            self._write_imports(text.references, folder, seen)


def avro_schema(schema_file, what="--format avro needs --schema-file (an .avsc file) to produce"):
    """The text of an .avsc (or JSON Schema .json) file."""
    if not schema_file:
        fail(what)
    with open(schema_file, encoding="utf-8") as f:
        text = f.read()
    json.loads(text)  # fail early on a file that is not JSON
    return text
