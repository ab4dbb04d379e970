"""The part of Chakra's execution-trace schema (ASTRA-sim 2.x workloads) this project reads,
written here as a protobuf descriptor (no generated code, no protoc).

It follows Chakra's public ``et_def.proto`` (package ``ChakraProtoMsg``, proto3): the field
numbers below are that file's, so the wire format is the same. Only what the collective
microbenchmarks use is declared; any other field of a file (tensor I/O info, storage, lists of
attribute values) is kept by protobuf as an unknown field and ignored::

    message AttributeProto { string name = 1; string doc_string = 2;
        oneof value { double double_val = 3; float float_val = 5; int32 int32_val = 7;
                      int64 int64_val = 9; uint32 uint32_val = 11; uint64 uint64_val = 13;
                      sint32 sint32_val = 15; sint64 sint64_val = 17; bool bool_val = 27;
                      string string_val = 29; } }
    message GlobalMetadata { string version = 1; repeated AttributeProto attr = 2; }
    enum NodeType { INVALID_NODE = 0; METADATA_NODE = 1; MEM_LOAD_NODE = 2; MEM_STORE_NODE = 3;
                    COMP_NODE = 4; COMM_SEND_NODE = 5; COMM_RECV_NODE = 6; COMM_COLL_NODE = 7; }
    enum CollectiveCommType { ALL_REDUCE = 0; REDUCE = 1; ALL_GATHER = 2; GATHER = 3; SCATTER = 4;
                              BROADCAST = 5; ALL_TO_ALL = 6; REDUCE_SCATTER = 7;
                              REDUCE_SCATTER_BLOCK = 8; BARRIER = 9; }
    message Node { uint64 id = 1; string name = 2; NodeType type = 3; repeated uint64 ctrl_deps = 4;
                   repeated uint64 data_deps = 5; uint64 start_time_micros = 6;
                   uint64 duration_micros = 7; repeated AttributeProto attr = 10; }

(``type`` is read as a plain integer so that node types added after this list still parse.)
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["GlobalMetadata", "Node", "AttributeProto", "NODE_TYPES", "COMM_TYPES"]

NODE_TYPES = {0: "INVALID_NODE", 1: "METADATA_NODE", 2: "MEM_LOAD_NODE", 3: "MEM_STORE_NODE", 4: "COMP_NODE",
              5: "COMM_SEND_NODE", 6: "COMM_RECV_NODE", 7: "COMM_COLL_NODE"}
COMM_TYPES = {0: "ALL_REDUCE", 1: "REDUCE", 2: "ALL_GATHER", 3: "GATHER", 4: "SCATTER", 5: "BROADCAST",
              6: "ALL_TO_ALL", 7: "REDUCE_SCATTER", 8: "REDUCE_SCATTER_BLOCK", 9: "BARRIER"}

_F = descriptor_pb2.FieldDescriptorProto
_ATTR_VALUES = [("double_val", 3, _F.TYPE_DOUBLE), ("float_val", 5, _F.TYPE_FLOAT), ("int32_val", 7, _F.TYPE_INT32),
                ("int64_val", 9, _F.TYPE_INT64), ("uint32_val", 11, _F.TYPE_UINT32),
                ("uint64_val", 13, _F.TYPE_UINT64), ("sint32_val", 15, _F.TYPE_SINT32),
                ("sint64_val", 17, _F.TYPE_SINT64), ("bool_val", 27, _F.TYPE_BOOL),
                ("string_val", 29, _F.TYPE_STRING)]


def _field(msg, name, number, ftype, label=_F.LABEL_OPTIONAL, type_name=None, oneof=None):
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof
    return f


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="fred_chakra_et.proto", package="ChakraProtoMsg",
                                            syntax="proto3")
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, _F.TYPE_STRING)
    _field(attr, "doc_string", 2, _F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for name, num, t in _ATTR_VALUES:
        _field(attr, name, num, t, oneof=0)
    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, _F.TYPE_STRING)
    _field(meta, "attr", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".ChakraProtoMsg.AttributeProto")
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, _F.TYPE_UINT64)
    _field(node, "name", 2, _F.TYPE_STRING)
    _field(node, "type", 3, _F.TYPE_INT32)        # NodeType: an enum on the wire is an int32 varint
    _field(node, "ctrl_deps", 4, _F.TYPE_UINT64, _F.LABEL_REPEATED)
    _field(node, "data_deps", 5, _F.TYPE_UINT64, _F.LABEL_REPEATED)
    _field(node, "start_time_micros", 6, _F.TYPE_UINT64)
    _field(node, "duration_micros", 7, _F.TYPE_UINT64)
    _field(node, "attr", 10, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".ChakraProtoMsg.AttributeProto")
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
AttributeProto = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("ChakraProtoMsg.AttributeProto"))
GlobalMetadata = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("ChakraProtoMsg.GlobalMetadata"))
Node = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("ChakraProtoMsg.Node"))
