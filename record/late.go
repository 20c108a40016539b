package record

// Late-record header keys, added to a late record's own headers (beside
// the lineage headers) when a stateful stage writes it to
// PROCESSOR_LATE_TOPIC: it came after its window closed, or (dedupe)
// further behind the stream time than the stage's grace. Times are
// milliseconds since the epoch, as record timestamps are, in ASCII
// decimal. They are part of the processor's public interface.
const (
	HeaderLateStore       = "processor.late.store"        // the store of the stage that found it late
	HeaderLateBy          = "processor.late.by.ms"        // how late: the stream time less the time its window closed (end plus grace), or (dedupe) less its timestamp plus the grace
	HeaderLateStreamTime  = "processor.late.stream.time"  // the partition's stream time when it came
	HeaderLateWindowStart = "processor.late.window.start" // its window's start (windowed stages only)
	HeaderLateWindowEnd   = "processor.late.window.end"   // its window's end, exclusive (windowed stages only)
)
