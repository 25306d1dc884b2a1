import Foundation

// interluded: composition root only; see Daemon.swift.
let status = await Daemon.run(arguments: CommandLine.arguments)
Daemon.logWriter.flush()
exit(status)
