package adamem.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.avro.Schema;
import org.apache.avro.SchemaNormalization;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.avro.message.BinaryMessageEncoder;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Checks adamem's wire format against the reference implementations, in one JVM.
 *
 * <p>{@code java adamem.conformance.Conformance REQUEST.json REPORT.json}. The request (written by
 * tests/conformance/test_java.py) names the .avsc folder and what to do; the report holds what
 * stock Avro and Kafka Java made of it, for the Python test to check:
 *
 * <ul>
 *   <li>{@code produce}: ChatMessages (Avro JSON) encoded with stock {@link BinaryMessageEncoder}
 *       and sent keyed by user_id with the producer's default partitioner to each topic; reports
 *       the bytes sent and where they landed.
 *   <li>{@code decode}: adamem-framed events (hex), decoded with stock {@link BinaryMessageDecoder}
 *       against the .avsc files; reports each record (GenericData JSON) and its re-encoding.
 *   <li>{@code refuse}: bytes {@link BinaryMessageDecoder} must NOT read (the old header order);
 *       reports the exception.
 *   <li>{@code container_files}: avro-tools' {@code getschema}, {@code count} and {@code tojson}
 *       run on each file, from the avro-tools jar in a class loader of its own.
 * </ul>
 */
public final class Conformance {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HexFormat HEX = HexFormat.of();
  private static final String[] SCHEMA_FILES = {
    "chat_message.avsc", "message_analyzed.avsc", "memory_forgotten.avsc", "memory_corrected.avsc",
    "answer_feedback.avsc", // feedback on answers (adamem.control)
    "memory_compressed.avsc", // a summary of episodic records (adamem.control)
    "memory_changed.avsc", // the change feed (adamem.changes)
    "memory_grant_changed.avsc", // grants of read access to another tenant (adamem.control)
    "memory_read.avsc", // reads under a grant, the owner's audit trail (adamem.audit)
    // The plaintext records inside the sealed ciphertexts (crypto-shredding); they name MessageAnalyzed's types.
    "message_content.avsc", "analysis_content.avsc", "compression_content.avsc"
  };

  private Conformance() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: Conformance REQUEST.json REPORT.json");
      System.exit(2);
    }
    JsonNode request = JSON.readTree(new File(args[0]));
    ObjectNode report = JSON.createObjectNode();
    report.put("java", System.getProperty("java.version"));
    report.put("avro", Schema.class.getPackage().getImplementationVersion());
    report.put("kafka_clients", kafkaVersion());

    Map<String, Schema> schemas = parseSchemas(new File(request.get("schemas").asText()));
    ObjectNode fingerprints = report.putObject("fingerprints");
    for (Schema s : schemas.values()) {
      // The CRC-64-AVRO fingerprint as Java computes it, printed as an unsigned 64-bit number.
      fingerprints.put(s.getFullName(), Long.toUnsignedString(SchemaNormalization.parsingFingerprint64(s), 16));
    }

    if (request.has("produce")) {
      report.set("produced", produce(request.get("produce"), schemas.get("adamem.events.ChatMessage")));
    }
    if (request.has("decode")) {
      report.set("decoded", decode(request.get("decode"), schemas));
    }
    if (request.has("refuse")) {
      report.set("refused", refuse(request.get("refuse"), schemas));
    }
    if (request.has("container_files")) {
      report.set("tools", tools(request.get("container_files"), new File(request.get("avro_tools").asText())));
    }
    JSON.writerWithDefaultPrettyPrinter().writeValue(new File(args[1]), report);
  }

  /** The project's .avsc files, parsed by one parser (MessageAnalyzed names ChatMessage; AnalysisContent its types). */
  private static Map<String, Schema> parseSchemas(File folder) throws Exception {
    Schema.Parser parser = new Schema.Parser();
    Map<String, Schema> out = new LinkedHashMap<>();
    for (String name : SCHEMA_FILES) {
      Schema s = parser.parse(new File(folder, name));
      out.put(s.getFullName(), s);
    }
    return out;
  }

  private static ArrayNode produce(JsonNode spec, Schema chatMessage) throws Exception {
    BinaryMessageEncoder<GenericRecord> encoder = new BinaryMessageEncoder<>(GenericData.get(), chatMessage);
    GenericDatumReader<GenericRecord> fromJson = new GenericDatumReader<>(chatMessage);
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, spec.get("bootstrap").asText());
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "adamem-java-conformance");
    // No partitioner.class: the producer's default (murmur2 of the key bytes) places each record.
    ArrayNode out = JSON.createArrayNode();
    try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(props)) {
      for (JsonNode message : spec.get("messages")) {
        GenericRecord record =
            fromJson.read(null, DecoderFactory.get().jsonDecoder(chatMessage, JSON.writeValueAsString(message)));
        byte[] value = bytes(encoder.encode(record));
        String key = record.get("user_id").toString();
        for (JsonNode topic : spec.get("topics")) {
          RecordMetadata meta = producer.send(new ProducerRecord<>(topic.asText(), key, value)).get();
          ObjectNode row = out.addObject();
          row.put("topic", meta.topic());
          row.put("partition", meta.partition());
          row.put("offset", meta.offset());
          row.put("key", key);
          row.put("hex", HEX.formatHex(value));
        }
      }
      producer.flush();
    }
    return out;
  }

  private static BinaryMessageDecoder<GenericRecord> decoder(Map<String, Schema> schemas, Schema reader) {
    BinaryMessageDecoder<GenericRecord> decoder = new BinaryMessageDecoder<>(GenericData.get(), reader);
    for (Schema s : schemas.values()) {
      decoder.addSchema(s); // every writer schema known by its fingerprint, as a reader would
    }
    return decoder;
  }

  private static ArrayNode decode(JsonNode items, Map<String, Schema> schemas) throws Exception {
    ArrayNode out = JSON.createArrayNode();
    for (JsonNode item : items) {
      Schema schema = schemas.get(item.get("schema").asText());
      byte[] data = HEX.parseHex(item.get("hex").asText());
      GenericRecord record = decoder(schemas, schema).decode(data);
      ObjectNode row = out.addObject();
      row.put("schema", record.getSchema().getFullName());
      row.set("record", JSON.readTree(GenericData.get().toString(record)));
      row.put("reencoded_hex", HEX.formatHex(bytes(new BinaryMessageEncoder<GenericRecord>(GenericData.get(), schema).encode(record))));
    }
    return out;
  }

  private static ArrayNode refuse(JsonNode items, Map<String, Schema> schemas) {
    ArrayNode out = JSON.createArrayNode();
    for (JsonNode item : items) {
      ObjectNode row = out.addObject();
      try {
        GenericRecord record =
            decoder(schemas, schemas.get(item.get("schema").asText())).decode(HEX.parseHex(item.get("hex").asText()));
        row.put("decoded", record.toString());
      } catch (Exception exc) {
        row.put("error", exc.getClass().getSimpleName() + ": " + exc.getMessage());
      }
    }
    return out;
  }

  /** avro-tools' getschema, count and tojson on each container file, in this JVM. */
  private static ArrayNode tools(JsonNode files, File toolsJar) throws Exception {
    ArrayNode out = JSON.createArrayNode();
    ClassLoader previous = Thread.currentThread().getContextClassLoader();
    try (URLClassLoader loader =
        new URLClassLoader(new URL[] {toolsJar.toURI().toURL()}, ClassLoader.getPlatformClassLoader())) {
      Thread.currentThread().setContextClassLoader(loader); // Hadoop's Configuration loads through it
      for (JsonNode file : files) {
        ObjectNode row = out.addObject();
        row.put("file", file.asText());
        row.put("getschema", runTool(loader, "org.apache.avro.tool.DataFileGetSchemaTool", file.asText()));
        row.put("count", runTool(loader, "org.apache.avro.tool.RecordCountTool", file.asText()));
        row.put("tojson", runTool(loader, "org.apache.avro.tool.DataFileReadTool", file.asText()));
      }
    } finally {
      Thread.currentThread().setContextClassLoader(previous);
    }
    return out;
  }

  private static String runTool(ClassLoader loader, String className, String file) throws Exception {
    Object tool = loader.loadClass(className).getDeclaredConstructor().newInstance();
    ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    InputStream stdin = new ByteArrayInputStream(new byte[0]);
    int rc;
    try (PrintStream o = new PrintStream(stdout, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(stderr, true, StandardCharsets.UTF_8)) {
      rc = (Integer) tool.getClass()
          .getMethod("run", InputStream.class, PrintStream.class, PrintStream.class, List.class)
          .invoke(tool, stdin, o, e, List.of(file));
    }
    if (rc != 0) {
      throw new IllegalStateException(className + " " + file + " exited " + rc + ": " + stderr.toString(StandardCharsets.UTF_8));
    }
    return stdout.toString(StandardCharsets.UTF_8);
  }

  private static String kafkaVersion() throws Exception {
    Properties version = new Properties();
    try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
      if (in != null) {
        version.load(in);
      }
    }
    return version.getProperty("version", "unknown");
  }

  private static byte[] bytes(ByteBuffer buffer) {
    byte[] out = new byte[buffer.remaining()];
    buffer.get(out);
    return out;
  }
}
