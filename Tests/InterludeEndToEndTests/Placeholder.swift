import Testing
@Test func placeholder_InterludeEndToEndTests() { #expect(Bool(true)) }
