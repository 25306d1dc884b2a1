import Testing
@Test func placeholder_InterludeWireTests() { #expect(Bool(true)) }
