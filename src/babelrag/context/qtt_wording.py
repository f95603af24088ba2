"""QTT-RAG's words in the question's language (docs/methods.md#qtt-rag): the generator's trust rule and the tag line's
labels — quality, the three criteria, and the two states a translated passage can be in without scores
(the judge failed: unscored; the translation itself failed: the original is shown, marked so). The
languages are the generator prompts' (``generate/prompts.py``): every language of the shipped data and
of the papers' tables. A language without its own text gets the English one with its name put in.
"""
from __future__ import annotations

from dataclasses import dataclass

from babelrag.lang.languages import language_name


@dataclass(frozen=True)
class QttWording:
    rules: str
    quality: str
    semantic: str
    grammar: str
    fluency: str
    unscored: str
    untranslated: str  # followed by the original's language code


WORDINGS: dict[str, QttWording] = {
    "en": QttWording(
        "Some documents were written in English; others were translated and carry quality scores for semantic "
        "equivalence, grammar and fluency (0–5). Rely first and most on the original documents, use translated "
        "ones as support in descending order of their scores, and treat uncertain information with caution.",
        "quality", "semantic", "grammar", "fluency", "unscored", "translation failed, original in"),
    "de": QttWording(
        "Einige Dokumente wurden auf Deutsch verfasst, andere wurden übersetzt und tragen Qualitätswerte für "
        "Bedeutungstreue, Grammatik und Flüssigkeit (0–5). Stütze dich zuerst und vor allem auf die Originale, "
        "nutze Übersetzungen ergänzend in absteigender Reihenfolge ihrer Werte und behandle unsichere Angaben mit "
        "Vorsicht.",
        "Qualität", "Bedeutung", "Grammatik", "Flüssigkeit", "nicht bewertet",
        "Übersetzung fehlgeschlagen, Original auf"),
    "es": QttWording(
        "Algunos documentos se escribieron en español; otros se tradujeron y llevan puntuaciones de calidad de "
        "equivalencia semántica, gramática y fluidez (0–5). Apóyate primero y sobre todo en los originales, usa las "
        "traducciones como apoyo en orden descendente de puntuación y trata con cautela la información dudosa.",
        "calidad", "semántica", "gramática", "fluidez", "sin puntuar", "traducción fallida, original en"),
    "fr": QttWording(
        "Certains documents ont été rédigés en français ; d'autres ont été traduits et portent des notes de qualité "
        "pour l'équivalence sémantique, la grammaire et la fluidité (0–5). Appuie-toi d'abord et surtout sur les "
        "documents originaux, utilise les traductions en appui par ordre décroissant de note et traite les "
        "informations incertaines avec prudence.",
        "qualité", "sémantique", "grammaire", "fluidité", "non noté", "traduction échouée, original en"),
    "it": QttWording(
        "Alcuni documenti sono stati scritti in italiano; altri sono stati tradotti e riportano punteggi di qualità "
        "per equivalenza semantica, grammatica e scorrevolezza (0–5). Basati prima di tutto sui documenti originali, "
        "usa quelli tradotti come supporto in ordine decrescente di punteggio e tratta con cautela le informazioni "
        "incerte.",
        "qualità", "semantica", "grammatica", "scorrevolezza", "non valutato", "traduzione non riuscita, originale in"),
    "pt": QttWording(
        "Alguns documentos foram escritos em português; outros foram traduzidos e trazem notas de qualidade para "
        "equivalência semântica, gramática e fluência (0–5). Baseie-se primeiro e sobretudo nos documentos "
        "originais, use os traduzidos como apoio em ordem decrescente de nota e trate informações incertas com "
        "cautela.",
        "qualidade", "semântica", "gramática", "fluência", "sem nota", "tradução falhou, original em"),
    "nl": QttWording(
        "Sommige documenten zijn in het Nederlands geschreven; andere zijn vertaald en hebben kwaliteitsscores voor "
        "betekenis, grammatica en vloeiendheid (0–5). Vertrouw eerst en vooral op de originele documenten, gebruik "
        "vertaalde als aanvulling in aflopende volgorde van hun score en ga voorzichtig om met onzekere informatie.",
        "kwaliteit", "betekenis", "grammatica", "vloeiendheid", "niet beoordeeld", "vertaling mislukt, origineel in het"),
    "sv": QttWording(
        "Vissa dokument är skrivna på svenska; andra är översatta och har kvalitetspoäng för betydelse, grammatik och "
        "flyt (0–5). Lita först och främst på originalen, använd översättningarna som stöd i fallande poängordning "
        "och var försiktig med osäker information.",
        "kvalitet", "betydelse", "grammatik", "flyt", "ej bedömd", "översättningen misslyckades, original på"),
    "da": QttWording(
        "Nogle dokumenter er skrevet på dansk; andre er oversat og har kvalitetspoint for betydning, grammatik og "
        "flydende sprog (0–5). Støt dig først og fremmest til originalerne, brug de oversatte som supplement i "
        "faldende pointorden, og behandl usikre oplysninger med forsigtighed.",
        "kvalitet", "betydning", "grammatik", "flydende", "ikke vurderet", "oversættelsen mislykkedes, original på"),
    "no": QttWording(
        "Noen dokumenter er skrevet på norsk; andre er oversatt og har kvalitetspoeng for betydning, grammatikk og "
        "flyt (0–5). Stol først og fremst på originalene, bruk de oversatte som støtte i synkende poengrekkefølge, og "
        "vær forsiktig med usikker informasjon.",
        "kvalitet", "betydning", "grammatikk", "flyt", "ikke vurdert", "oversettelsen mislyktes, original på"),
    "fi": QttWording(
        "Osa asiakirjoista on kirjoitettu suomeksi; osa on käännetty, ja niillä on laatupisteet merkityksen, "
        "kieliopin ja sujuvuuden osalta (0–5). Nojaa ensisijaisesti alkuperäisiin asiakirjoihin, käytä käännöksiä "
        "tukena pisteiden mukaan laskevassa järjestyksessä ja suhtaudu epävarmaan tietoon varoen.",
        "laatu", "merkitys", "kielioppi", "sujuvuus", "ei arvioitu", "käännös epäonnistui, alkuperäinen kielellä"),
    "pl": QttWording(
        "Niektóre dokumenty zostały napisane po polsku; inne przetłumaczono i mają oceny jakości za wierność "
        "znaczenia, gramatykę i płynność (0–5). Opieraj się przede wszystkim na oryginałach, tłumaczeń używaj "
        "pomocniczo w kolejności malejących ocen, a niepewne informacje traktuj ostrożnie.",
        "jakość", "znaczenie", "gramatyka", "płynność", "bez oceny", "tłumaczenie nieudane, oryginał w języku"),
    "ru": QttWording(
        "Часть документов написана на русском языке; другие переведены и имеют оценки качества: смысловая точность, "
        "грамматика и беглость (0–5). Опирайся прежде всего на оригиналы, используй переводы как дополнение в "
        "порядке убывания оценок и осторожно относись к сомнительным сведениям.",
        "качество", "смысл", "грамматика", "беглость", "без оценки", "перевод не удался, оригинал на языке"),
    "uk": QttWording(
        "Частину документів написано українською; інші перекладено, і вони мають оцінки якості: смислова точність, "
        "граматика та плавність (0–5). Спирайся насамперед на оригінали, використовуй переклади як доповнення в "
        "порядку спадання оцінок і обережно стався до непевних відомостей.",
        "якість", "зміст", "граматика", "плавність", "без оцінки", "переклад не вдався, оригінал мовою"),
    "tr": QttWording(
        "Bazı belgeler Türkçe yazılmıştır; diğerleri çevrilmiştir ve anlamsal denklik, dil bilgisi ve akıcılık için "
        "kalite puanları taşır (0–5). Öncelikle ve en çok özgün belgelere dayan, çevrilmiş belgeleri puanlarına göre "
        "azalan sırayla destek olarak kullan ve belirsiz bilgilere temkinli yaklaş.",
        "kalite", "anlam", "dil bilgisi", "akıcılık", "puanlanmadı", "çeviri başarısız, özgün dil"),
    "ar": QttWording(
        "بعض الوثائق مكتوبة باللغة العربية؛ وبعضها مترجم ويحمل درجات جودة للتكافؤ الدلالي والقواعد والسلاسة (0–5). "
        "اعتمد أولًا وأساسًا على الوثائق الأصلية، واستخدم المترجمة للدعم بترتيب تنازلي حسب درجاتها، وتعامل بحذر مع "
        "المعلومات غير المؤكدة.",
        "الجودة", "الدلالة", "القواعد", "السلاسة", "غير مُقيَّم", "فشلت الترجمة، الأصل باللغة"),
    "zh": QttWording(
        "部分文档原本以中文撰写；其他文档为译文，并附有语义等价、语法和流畅度的质量评分（0–5）。请首先并主要依据原文文档，"
        "按评分从高到低将译文作为补充，并谨慎对待不确定的信息。",
        "质量", "语义", "语法", "流畅度", "未评分", "翻译失败，原文语言"),
    "ja": QttWording(
        "一部の文書は日本語で書かれています。その他は翻訳されたもので、意味の等価性・文法・流暢さの品質スコア（0–5）が"
        "付いています。まず原文の文書を最も重視し、翻訳文書はスコアの高い順に補助として使い、不確かな情報は慎重に扱ってください。",
        "品質", "意味", "文法", "流暢さ", "未評価", "翻訳失敗、原文の言語"),
    "ko": QttWording(
        "일부 문서는 한국어로 작성되었고, 나머지는 번역된 것으로 의미 동등성, 문법, 유창성에 대한 품질 점수(0–5)가 붙어 "
        "있습니다. 원문 문서를 가장 먼저, 가장 많이 신뢰하고, 번역된 문서는 점수가 높은 순서대로 보조 자료로 사용하며, "
        "불확실한 정보는 신중하게 다루세요.",
        "품질", "의미", "문법", "유창성", "평가 없음", "번역 실패, 원문 언어"),
    "th": QttWording(
        "เอกสารบางฉบับเขียนเป็นภาษาไทย ส่วนฉบับอื่นเป็นฉบับแปลและมีคะแนนคุณภาพด้านความหมาย ไวยากรณ์ และความลื่นไหล (0–5) "
        "ให้ยึดเอกสารต้นฉบับเป็นหลักก่อน ใช้ฉบับแปลเป็นข้อมูลเสริมตามลำดับคะแนนจากมากไปน้อย และระมัดระวังข้อมูลที่ไม่แน่นอน",
        "คุณภาพ", "ความหมาย", "ไวยากรณ์", "ความลื่นไหล", "ไม่มีคะแนน", "แปลไม่สำเร็จ ต้นฉบับภาษา"),
    "vi": QttWording(
        "Một số tài liệu được viết bằng tiếng Việt; số khác là bản dịch và có điểm chất lượng về tương đương ngữ "
        "nghĩa, ngữ pháp và độ trôi chảy (0–5). Hãy dựa trước hết và chủ yếu vào tài liệu gốc, dùng bản dịch để bổ "
        "trợ theo thứ tự điểm giảm dần và thận trọng với thông tin không chắc chắn.",
        "chất lượng", "ngữ nghĩa", "ngữ pháp", "trôi chảy", "chưa chấm điểm", "dịch thất bại, bản gốc tiếng"),
    "id": QttWording(
        "Sebagian dokumen ditulis dalam bahasa Indonesia; yang lain diterjemahkan dan memiliki skor kualitas untuk "
        "kesetaraan makna, tata bahasa, dan kelancaran (0–5). Andalkan dokumen asli terlebih dahulu dan terutama, "
        "gunakan terjemahan sebagai pendukung sesuai urutan skor dari yang tertinggi, dan perlakukan informasi yang "
        "tidak pasti dengan hati-hati.",
        "kualitas", "makna", "tata bahasa", "kelancaran", "tanpa skor", "terjemahan gagal, asli dalam bahasa"),
    "hi": QttWording(
        "कुछ दस्तावेज़ हिंदी में लिखे गए हैं; अन्य अनूदित हैं और उनमें अर्थ-समानता, व्याकरण और प्रवाह के गुणवत्ता अंक (0–5) "
        "हैं। सबसे पहले और सबसे अधिक मूल दस्तावेज़ों पर भरोसा करें, अनूदित दस्तावेज़ों को उनके अंकों के घटते क्रम में सहायक "
        "के रूप में उपयोग करें, और अनिश्चित जानकारी को सावधानी से लें।",
        "गुणवत्ता", "अर्थ", "व्याकरण", "प्रवाह", "अंक नहीं", "अनुवाद विफल, मूल भाषा"),
    "el": QttWording(
        "Ορισμένα έγγραφα γράφτηκαν στα ελληνικά· άλλα μεταφράστηκαν και φέρουν βαθμούς ποιότητας για σημασιολογική "
        "ισοδυναμία, γραμματική και ροή (0–5). Βασίσου πρώτα και κυρίως στα πρωτότυπα έγγραφα, χρησιμοποίησε τα "
        "μεταφρασμένα συμπληρωματικά κατά φθίνουσα σειρά βαθμού και αντιμετώπισε τις αβέβαιες πληροφορίες με "
        "προσοχή.",
        "ποιότητα", "σημασία", "γραμματική", "ροή", "χωρίς βαθμό", "η μετάφραση απέτυχε, πρωτότυπο στη γλώσσα"),
}


def qtt_wording(lang: str) -> QttWording:
    if lang in WORDINGS:
        return WORDINGS[lang]
    english = WORDINGS["en"]
    return QttWording(english.rules.replace("written in English", f"written in {language_name(lang)}"),
                      *(getattr(english, f) for f in ("quality", "semantic", "grammar", "fluency", "unscored",
                                                      "untranslated")))
