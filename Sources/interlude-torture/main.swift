import Foundation

// interlude-torture: composition root only; see Torture.swift. No C callbacks here (DESIGN.md:
// callbacks and signal handlers written in main-actor code trap under Swift 6).
exit(await Torture.run(Array(CommandLine.arguments.dropFirst())))
