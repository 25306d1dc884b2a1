import Foundation

/// Draws a scenario run as an SVG: each source's measured level over time (dB, from the recording),
/// the steps as labelled vertical lines, and each level expectation as a green (held) or red
/// (failed) mark.
public enum ScenarioPlot {
    public static func svg(_ scenario: Scenario, _ report: ScenarioRunner.Report) -> String {
        let width = 960.0, height = 420.0, left = 60.0, right = 150.0, top = 30.0, bottom = 60.0
        let plotW = width - left - right, plotH = height - top - bottom
        let tMax = scenario.duration, dbMin = -60.0, dbMax = 6.0
        func x(_ t: Double) -> Double { left + plotW * max(0, min(1, t / tMax)) }
        func y(_ db: Double) -> Double { top + plotH * (1 - (max(dbMin, min(dbMax, db)) - dbMin) / (dbMax - dbMin)) }
        let colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
        var sources: [(String, Double)] = scenario.sessions.map { ($0.name, $0.tone) }
        sources += scenario.streamTones.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }

        var out = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="12">
        <rect width="100%" height="100%" fill="white"/>
        <text x="\(left)" y="18" font-size="14" font-weight="bold">\(escape(scenario.name))</text>

        """
        for db in stride(from: -60.0, through: 0, by: 10) {
            out += "<line x1=\"\(left)\" y1=\"\(y(db))\" x2=\"\(left + plotW)\" y2=\"\(y(db))\" stroke=\"#eee\"/>"
            out += "<text x=\"\(left - 6)\" y=\"\(y(db) + 4)\" text-anchor=\"end\">\(Int(db)) dB</text>\n"
        }
        for t in stride(from: 0.0, through: tMax, by: 1) {
            out += "<text x=\"\(x(t))\" y=\"\(top + plotH + 16)\" text-anchor=\"middle\">\(Int(t)) s</text>\n"
        }
        out += "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(plotW)\" height=\"\(plotH)\" fill=\"none\" stroke=\"#888\"/>\n"
        for (i, step) in scenario.steps.enumerated() {
            let label = describe(step.action)
            out += "<line x1=\"\(x(step.at))\" y1=\"\(top)\" x2=\"\(x(step.at))\" y2=\"\(top + plotH)\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>"
            out += "<text x=\"\(x(step.at) + 3)\" y=\"\(top + plotH + 30 + Double(i % 2) * 13)\" fill=\"#333\">\(escape(label))</text>\n"
        }
        let hop = 0.02
        for (i, src) in sources.enumerated() {
            let levels = ToneAnalysis.levels(samples: report.recording, sampleRate: report.sampleRate, frequency: src.1,
                                             window: ToneAnalysis.defaultWindow, hop: hop)
            let color = colors[i % colors.count]
            var points: [String] = []
            for (k, db) in levels.enumerated() {
                let t = report.recordingStart + Double(k) * hop + ToneAnalysis.defaultWindow / 2
                guard t >= 0 && t <= tMax else { continue }
                points.append(String(format: "%.1f,%.1f", x(t), y(db)))
            }
            out += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.8\" points=\"\(points.joined(separator: " "))\"/>\n"
            out += "<line x1=\"\(left + plotW + 12)\" y1=\"\(top + 10 + Double(i) * 18)\" x2=\"\(left + plotW + 32)\" y2=\"\(top + 10 + Double(i) * 18)\" stroke=\"\(color)\" stroke-width=\"3\"/>"
            out += "<text x=\"\(left + plotW + 38)\" y=\"\(top + 14 + Double(i) * 18)\">\(escape(src.0)) \(Int(src.1)) Hz</text>\n"
        }
        for (e, o) in zip(scenario.expectations, report.outcomes) {
            guard let at = e.at, let level = e.level else { continue }
            let (lo, hi): (Double, Double) = { if case let .range(a, b) = level { return (a, b) } else { return (dbMin, -50) } }()
            let color = o.held ? "#2ca02c" : "#d62728"
            out += "<rect x=\"\(x(at) - 4)\" y=\"\(y(hi))\" width=\"8\" height=\"\(max(2, y(lo) - y(hi)))\" fill=\"\(color)\" fill-opacity=\"0.35\" stroke=\"\(color)\"><title>\(escape(o.text))</title></rect>\n"
        }
        out += "</svg>\n"
        return out
    }

    static func describe(_ a: Scenario.Action) -> String {
        switch a {
        case let .activate(s, _): return "activate \(s)"
        case let .deactivate(s, _): return "deactivate \(s)"
        case let .pause(s): return "pause \(s)"
        case let .play(s): return "play \(s)"
        case let .crash(s): return "crash \(s)"
        case let .volume(s, db): return "volume \(s) \(fmt(db)) dB"
        case let .stream(x, role, _): return "stream \(x) (\(role))"
        case let .closeStream(x): return "close \(x)"
        case let .ringer(silent): return "ringer \(silent ? "silent" : "ring")"
        case let .focus(f): return "focus \(f)"
        case let .notify(id, _): return "notify \(id)"
        }
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
