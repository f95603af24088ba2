"""Generator prompts written in the question's language ([BERGEN] basic_translated_langspec, docs/methods.md#generation-prompt).

The system turn asks, in Lq, to extract the relevant information from the numbered documents and
answer as briefly as possible in Lq, citing documents by number; the no-evidence variant only
asks for a brief answer in Lq. A language without its own text gets the English one with the
answer language named.
"""
from __future__ import annotations

from dataclasses import dataclass

from babelrag.lang.languages import language_name


@dataclass(frozen=True)
class Wording:
    with_docs: str
    without_docs: str
    background: str
    question: str


WORDINGS: dict[str, Wording] = {
    "en": Wording("Extract the relevant information from the documents and answer the question as briefly as "
                  "possible, in English. Cite the documents you use by their number, like [1].",
                  "Answer the question as briefly as possible, in English.", "Background", "Question"),
    "de": Wording("Entnimm den Dokumenten die relevanten Informationen und beantworte die Frage so kurz wie möglich "
                  "auf Deutsch. Nenne die verwendeten Dokumente mit ihrer Nummer, z. B. [1].",
                  "Beantworte die Frage so kurz wie möglich auf Deutsch.", "Hintergrund", "Frage"),
    "es": Wording("Extrae la información relevante de los documentos y responde a la pregunta de la forma más breve "
                  "posible, en español. Cita los documentos que uses por su número, por ejemplo [1].",
                  "Responde a la pregunta de la forma más breve posible, en español.", "Contexto", "Pregunta"),
    "fr": Wording("Extrais les informations pertinentes des documents et réponds à la question le plus brièvement "
                  "possible, en français. Cite les documents utilisés par leur numéro, par exemple [1].",
                  "Réponds à la question le plus brièvement possible, en français.", "Contexte", "Question"),
    "it": Wording("Estrai le informazioni rilevanti dai documenti e rispondi alla domanda nel modo più breve "
                  "possibile, in italiano. Cita i documenti usati con il loro numero, ad esempio [1].",
                  "Rispondi alla domanda nel modo più breve possibile, in italiano.", "Contesto", "Domanda"),
    "pt": Wording("Extraia as informações relevantes dos documentos e responda à pergunta da forma mais breve "
                  "possível, em português. Cite os documentos usados pelo número, por exemplo [1].",
                  "Responda à pergunta da forma mais breve possível, em português.", "Contexto", "Pergunta"),
    "nl": Wording("Haal de relevante informatie uit de documenten en beantwoord de vraag zo kort mogelijk, in het "
                  "Nederlands. Vermeld de gebruikte documenten met hun nummer, bijvoorbeeld [1].",
                  "Beantwoord de vraag zo kort mogelijk, in het Nederlands.", "Achtergrond", "Vraag"),
    "sv": Wording("Hämta den relevanta informationen ur dokumenten och besvara frågan så kort som möjligt, på "
                  "svenska. Hänvisa till dokumenten du använder med deras nummer, till exempel [1].",
                  "Besvara frågan så kort som möjligt, på svenska.", "Bakgrund", "Fråga"),
    "da": Wording("Find de relevante oplysninger i dokumenterne, og besvar spørgsmålet så kort som muligt på dansk. "
                  "Henvis til de anvendte dokumenter med deres nummer, f.eks. [1].",
                  "Besvar spørgsmålet så kort som muligt på dansk.", "Baggrund", "Spørgsmål"),
    "no": Wording("Hent den relevante informasjonen fra dokumentene og svar på spørsmålet så kort som mulig, på "
                  "norsk. Vis til dokumentene du bruker med nummeret deres, for eksempel [1].",
                  "Svar på spørsmålet så kort som mulig, på norsk.", "Bakgrunn", "Spørsmål"),
    "fi": Wording("Poimi asiakirjoista olennaiset tiedot ja vastaa kysymykseen mahdollisimman lyhyesti suomeksi. "
                  "Viittaa käyttämiisi asiakirjoihin niiden numerolla, esimerkiksi [1].",
                  "Vastaa kysymykseen mahdollisimman lyhyesti suomeksi.", "Tausta", "Kysymys"),
    "pl": Wording("Wydobądź z dokumentów istotne informacje i odpowiedz na pytanie jak najkrócej, po polsku. "
                  "Powołuj się na użyte dokumenty ich numerem, np. [1].",
                  "Odpowiedz na pytanie jak najkrócej, po polsku.", "Kontekst", "Pytanie"),
    "ru": Wording("Извлеки из документов нужную информацию и ответь на вопрос как можно короче, на русском языке. "
                  "Указывай использованные документы их номером, например [1].",
                  "Ответь на вопрос как можно короче, на русском языке.", "Контекст", "Вопрос"),
    "uk": Wording("Візьми з документів потрібну інформацію та дай відповідь на запитання якомога коротше, "
                  "українською мовою. Вказуй використані документи їхнім номером, наприклад [1].",
                  "Дай відповідь на запитання якомога коротше, українською мовою.", "Контекст", "Запитання"),
    "tr": Wording("Belgelerden ilgili bilgileri çıkar ve soruyu olabildiğince kısa, Türkçe olarak yanıtla. "
                  "Kullandığın belgeleri numaralarıyla belirt, örneğin [1].",
                  "Soruyu olabildiğince kısa, Türkçe olarak yanıtla.", "Arka plan", "Soru"),
    "ar": Wording("استخرج المعلومات ذات الصلة من الوثائق وأجب عن السؤال بأقصر ما يمكن، باللغة العربية. "
                  "أشر إلى الوثائق التي تستخدمها برقمها، مثل [1].",
                  "أجب عن السؤال بأقصر ما يمكن، باللغة العربية.", "خلفية", "السؤال"),
    "zh": Wording("从文档中提取相关信息，并用中文尽可能简短地回答问题。请用编号引用你使用的文档，例如 [1]。",
                  "请用中文尽可能简短地回答问题。", "背景", "问题"),
    "ja": Wording("文書から関連する情報を抽出し、質問にできるだけ簡潔に日本語で答えてください。"
                  "使用した文書は番号で示してください（例：[1]）。",
                  "質問にできるだけ簡潔に日本語で答えてください。", "背景", "質問"),
    "ko": Wording("문서에서 관련 정보를 찾아 질문에 한국어로 최대한 간결하게 답하세요. 사용한 문서는 번호로 인용하세요(예: [1]).",
                  "질문에 한국어로 최대한 간결하게 답하세요.", "배경", "질문"),
    "th": Wording("ดึงข้อมูลที่เกี่ยวข้องจากเอกสารและตอบคำถามให้สั้นที่สุดเท่าที่จะทำได้เป็นภาษาไทย "
                  "อ้างอิงเอกสารที่ใช้ด้วยหมายเลข เช่น [1]",
                  "ตอบคำถามให้สั้นที่สุดเท่าที่จะทำได้เป็นภาษาไทย", "ข้อมูลประกอบ", "คำถาม"),
    "vi": Wording("Trích xuất thông tin liên quan từ các tài liệu và trả lời câu hỏi ngắn gọn nhất có thể bằng "
                  "tiếng Việt. Trích dẫn tài liệu bạn dùng bằng số thứ tự, ví dụ [1].",
                  "Trả lời câu hỏi ngắn gọn nhất có thể bằng tiếng Việt.", "Bối cảnh", "Câu hỏi"),
    "id": Wording("Ambil informasi yang relevan dari dokumen dan jawab pertanyaan sesingkat mungkin dalam bahasa "
                  "Indonesia. Sebutkan dokumen yang kamu gunakan dengan nomornya, misalnya [1].",
                  "Jawab pertanyaan sesingkat mungkin dalam bahasa Indonesia.", "Latar belakang", "Pertanyaan"),
    "hi": Wording("दस्तावेज़ों से प्रासंगिक जानकारी निकालें और प्रश्न का उत्तर हिंदी में यथासंभव संक्षेप में दें। "
                  "उपयोग किए गए दस्तावेज़ों का उल्लेख उनकी संख्या से करें, जैसे [1]।",
                  "प्रश्न का उत्तर हिंदी में यथासंभव संक्षेप में दें।", "पृष्ठभूमि", "प्रश्न"),
    "el": Wording("Εξάγαγε τις σχετικές πληροφορίες από τα έγγραφα και απάντησε στην ερώτηση όσο πιο σύντομα "
                  "γίνεται, στα ελληνικά. Παράπεμψε στα έγγραφα που χρησιμοποιείς με τον αριθμό τους, π.χ. [1].",
                  "Απάντησε στην ερώτηση όσο πιο σύντομα γίνεται, στα ελληνικά.", "Πλαίσιο", "Ερώτηση"),
}

def wording(lang: str) -> Wording:
    if lang in WORDINGS:
        return WORDINGS[lang]
    name = language_name(lang)
    english = WORDINGS["en"]
    return Wording(english.with_docs.replace("in English", f"in {name}"),
                   english.without_docs.replace("in English", f"in {name}"), english.background, english.question)
