import CPulse
import Foundation

// Small conversions between Swift values and libpulse's C types. Internal.

/// Lowest level reported in dB: what `pa_sw_volume_to_dB` gives as −inf for `PA_VOLUME_MUTED`.
let silenceDb: Double = -200

/// `pa_sw_volume_to_dB`, with −inf (and anything below) reported as −200.
func volumeToDb(_ v: pa_volume_t) -> Double {
    let db = pa_sw_volume_to_dB(v)
    return db.isFinite ? max(db, silenceDb) : silenceDb
}

/// `pa_sw_volume_from_dB`, with −200 and below mapped to `PA_VOLUME_MUTED` (0).
func volumeFromDb(_ db: Double) -> pa_volume_t {
    db <= silenceDb ? 0 : pa_sw_volume_from_dB(db)
}

/// The per-channel values of a `pa_cvolume`.
func channelVolumes(_ cv: pa_cvolume) -> [pa_volume_t] {
    var cv = cv
    let count = min(Int(cv.channels), Int(PA_CHANNELS_MAX))
    return withUnsafeBytes(of: &cv.values) { Array($0.bindMemory(to: pa_volume_t.self).prefix(count)) }
}

/// A `pa_cvolume` with these per-channel values.
func makeCVolume(_ values: [pa_volume_t]) -> pa_cvolume {
    var cv = pa_cvolume()
    let count = min(values.count, Int(PA_CHANNELS_MAX))
    cv.channels = UInt8(count)
    withUnsafeMutableBytes(of: &cv.values) { raw in
        let slots = raw.bindMemory(to: pa_volume_t.self)
        for i in 0..<count { slots[i] = values[i] }
    }
    return cv
}

/// Average over channels in dB, as `pa_cvolume_avg` then `pa_sw_volume_to_dB`.
func averageDb(_ values: [pa_volume_t]) -> Double {
    guard !values.isEmpty else { return silenceDb }
    var cv = makeCVolume(values)
    return volumeToDb(pa_cvolume_avg(&cv))
}

/// Two volumes are "the same write" when every channel agrees within 0.05 dB (or both are silent).
/// The server stores what a client wrote, so this only absorbs rounding.
func sameVolume(_ a: [pa_volume_t], _ b: [pa_volume_t]) -> Bool {
    guard a.count == b.count else { return false }
    for (x, y) in zip(a, b) where x != y {
        if abs(volumeToDb(x) - volumeToDb(y)) > 0.05 { return false }
    }
    return true
}

/// `user × gain` per channel (`pa_sw_volume_multiply`: a product of linear amplitudes).
func applyGain(_ user: [pa_volume_t], gainDb: Double) -> [pa_volume_t] {
    let factor = volumeFromDb(gainDb)
    return user.map { pa_sw_volume_multiply($0, factor) }
}

/// A new `pa_proplist` holding `properties` (`pa_proplist_sets`); the caller frees it.
/// Throws `invalidArgument` for a key PulseAudio refuses.
func makeProplist(_ properties: [String: String]) throws -> OpaquePointer {
    guard let list = pa_proplist_new() else { throw PulseError.operationFailed("pa_proplist_new failed") }
    for (key, value) in properties.sorted(by: { $0.key < $1.key }) where pa_proplist_sets(list, key, value) < 0 {
        pa_proplist_free(list)
        throw PulseError.invalidArgument("property key \"\(key)\" refused by PulseAudio")
    }
    return list
}

/// Every string-valued entry of a `pa_proplist` (binary values are skipped).
func readProplist(_ list: OpaquePointer?) -> [String: String] {
    guard let list else { return [:] }
    var result: [String: String] = [:]
    var state: UnsafeMutableRawPointer? = nil
    while let key = pa_proplist_iterate(list, &state) {
        if let value = pa_proplist_gets(list, key) {
            result[String(cString: key)] = String(cString: value)
        }
    }
    return result
}

/// `application.process.id` parsed from a property list.
func processID(in properties: [String: String]) -> Int32? {
    properties["application.process.id"].flatMap { Int32($0) }
}

/// `PA_INVALID_INDEX` (the macro does not import into Swift).
let invalidIndex = UInt32.max

/// The monotonic clock the recorder's timestamps use.
public enum PulseClock {
    /// `CLOCK_MONOTONIC` now, in seconds. `PulseRecorder.startTime` is on this clock, so a time taken
    /// here before an action can be placed in a recording.
    public static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
