package listener

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
)

// A FETCH_LOG answer encoded in parts is, joined, byte for byte what
// proto.Marshal makes of the same FetchLogResponse: records in several
// parts, set and empty, unset beside an error, a partition id, two tables
// (one id negative, a ten-byte varint), and no tables at all.
func TestFetchAnswerEncodesAsMarshal(t *testing.T) {
	bucket := func(id int32, records ...[]byte) answerBucket {
		ab := answerBucket{res: &flusspb.PbFetchLogRespForBucket{BucketId: proto.Int32(id), HighWatermark: proto.Int64(1 << 40), LogStartOffset: proto.Int64(3)}, records: [][]byte{}}
		for _, r := range records {
			ab.records = append(ab.records, r)
			ab.size += len(r)
		}
		return ab
	}
	failed := bucket(2)
	setBucketError(&failed.res.ErrorCode, &failed.res.ErrorMessage, errPartitioned)
	failed.records = nil
	partitioned := bucket(0, bytes.Repeat([]byte{7}, 300))
	partitioned.res.PartitionId = proto.Int64(9)
	for _, tc := range []struct {
		name   string
		tables []answerTable
	}{
		{"none", nil},
		{"buckets", []answerTable{
			{id: 12, buckets: []answerBucket{bucket(0, []byte("one"), bytes.Repeat([]byte{1}, 200), []byte("three")), bucket(1), failed}},
			{id: -5, buckets: []answerBucket{partitioned}},
			{id: 13},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := &flusspb.FetchLogResponse{}
			for _, at := range tc.tables {
				tr := &flusspb.PbFetchLogRespForTable{TableId: proto.Int64(at.id)}
				for _, ab := range at.buckets {
					res := proto.Clone(ab.res).(*flusspb.PbFetchLogRespForBucket)
					if ab.records != nil {
						res.Records = append([]byte{}, bytes.Join(ab.records, nil)...)
					}
					tr.BucketsResp = append(tr.BucketsResp, res)
				}
				want.TablesResp = append(want.TablesResp, tr)
			}
			wantBytes, err := proto.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			a := &fetchAnswer{tables: tc.tables}
			p, err := a.encode()
			if err != nil {
				t.Fatal(err)
			}
			defer p.done()
			if got := bytes.Join(p.bufs, nil); !bytes.Equal(got, wantBytes) {
				t.Fatalf("in parts\n got % x\nwant % x", got, wantBytes)
			}
		})
	}
}
