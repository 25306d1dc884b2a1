import Foundation

// interluded: composition root only; see Daemon.swift.
exit(await Daemon.run(arguments: CommandLine.arguments))
