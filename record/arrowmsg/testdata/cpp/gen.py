# Writes none.msg, lz4.msg and zstd.msg: the RecordBatch message that Arrow C++
# (pyarrow) writes for the record in want.arrows, uncompressed and with each
# body compression. TestArrowCppMessages reads them. Run from this directory:
#   python3 -m pip install pyarrow && python3 gen.py
# (Generated with pyarrow 26.0.1.)
import pyarrow as pa
import pyarrow.ipc as ipc

batch = ipc.open_stream(open("want.arrows", "rb").read()).read_all().combine_chunks().to_batches()[0]
for name, codec in [("none", None), ("lz4", "lz4"), ("zstd", "zstd")]:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, batch.schema, options=ipc.IpcWriteOptions(compression=codec)) as w:
        w.write_batch(batch)
    schema_msg, batch_msg = list(ipc.MessageReader.open_stream(sink.getvalue()))
    assert batch_msg.type == "record batch"
    open(name + ".msg", "wb").write(batch_msg.serialize().to_pybytes())
