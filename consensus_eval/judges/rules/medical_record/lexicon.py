"""The word lists and tables the medical-record rules read (data only): section headings, colloquial
terms, vague time words, drugs (classes, generic, brand and short names, class words), measurement
keywords, and the diseases, topics, diagnoses and present-illness parts the checks look for.
"""

from __future__ import annotations

from consensus_eval.domain.rubric import load_rubric
from consensus_eval.domain.sections import Sections

# the section headings are the rubric's data (configs/rubrics/medical_record.yaml: sections, headings),
# which grounding and the review pages read too
#: the rubric's headings, compiled
SECTIONS = Sections.of(load_rubric("medical_record"))
#: the rubric's record sections, in the order a record should give them
SECTION_ORDER = SECTIONS.order
#: heading as written -> the section it is
SECTION_ALIASES = SECTIONS.aliases
#: headings that end a section without being one of the rubric's sections
OTHER_HEADINGS = SECTIONS.other

#: colloquial phrase -> standard term (each occurrence in the record is a deduction)
COLLOQUIAL_TERMS: dict[str, str] = {
    "经常口渴": "多饮", "老是口渴": "多饮", "总是口渴": "多饮", "总口渴": "多饮", "特别渴": "多饮",
    "喝水多": "多饮", "喝水很多": "多饮", "喝很多水": "多饮", "喝水特别多": "多饮", "水喝得多": "多饮",
    "尿很多": "多尿", "尿多": "多尿", "尿得多": "多尿", "尿也多": "多尿", "小便多": "多尿",
    "小便很多": "多尿", "尿尿": "排尿", "老上厕所": "尿频", "总上厕所": "尿频", "上厕所": "排尿/尿频",
    "跑厕所": "尿频", "起夜": "夜尿增多",
    "看不清楚": "视物模糊", "看不清": "视物模糊", "看东西模糊": "视物模糊", "看东西不清": "视物模糊",
    "看东西花": "视物模糊", "眼睛模糊": "视物模糊", "眼花": "视物模糊",
    "脚麻": "下肢麻木", "脚发麻": "下肢麻木", "手脚发麻": "肢端麻木", "手脚麻": "肢端麻木",
    "腿麻": "下肢麻木", "手麻": "手指麻木",
    "血糖高": "血糖升高", "血糖很高": "血糖明显升高", "血糖太高": "血糖明显升高", "血糖老高": "血糖升高",
    "血糖挺高": "血糖升高", "血糖比较高": "血糖升高", "血糖有点高": "血糖偏高",
    "血压高": "血压升高", "血脂高": "血脂异常",
    "老是饿": "多食", "总是饿": "多食", "经常饿": "多食", "容易饿": "多食", "饿得快": "多食",
    "吃得多": "多食", "饭量大": "多食",
    "没劲": "乏力", "没力气": "乏力", "没有力气": "乏力", "没啥力气": "乏力", "浑身没劲": "乏力",
    "瘦了": "体重下降", "掉秤": "体重下降",
    "拉肚子": "腹泻", "肚子疼": "腹痛", "肚子痛": "腹痛", "头疼": "头痛", "嘴干": "口干", "嘴巴干": "口干",
    "腿肿": "下肢水肿", "脚肿": "足部水肿", "尿里有泡沫": "泡沫尿", "心里发慌": "心悸",
    "吃药": "服药", "打针": "注射", "抽烟": "吸烟", "喝酒": "饮酒",
}
#: characters that, right after a colloquial phrase, make it part of a standard expression
COLLOQUIAL_NOT_BEFORE = {
    "血糖高": "于达过峰值低出", "血压高": "于达过峰值低出危", "血脂高": "于达过", "尿多": "次",
    "脚麻": "木", "脚发麻": "木", "手脚麻": "木", "腿麻": "木", "手麻": "木", "眼花": "缭",
}

#: vague time words (each occurrence in the record is a deduction; see wording.py)
VAGUE_TIME_WORDS = ("很久以前", "很久之前", "很早以前", "好久以前", "好久之前", "很长时间", "挺长时间",
                    "前段时间", "前一段时间", "前阵子", "前些日子", "前些天", "前几天", "这几天", "这段时间",
                    "有一阵子", "一阵子", "一段时间", "那时候", "早些年", "前几年", "前些年", "多年前",
                    "几年前", "数年前", "很久", "好久", "多年", "数年", "几年", "几个月", "数个月", "数月",
                    "近来", "最近", "近期", "之前", "以前")

#: drug class -> generic names
DRUG_CLASSES: dict[str, tuple[str, ...]] = {
    "双胍类": ("二甲双胍",),
    "磺脲类": ("格列美脲", "格列齐特", "格列吡嗪", "格列喹酮", "格列本脲"),
    "α-糖苷酶抑制剂": ("阿卡波糖", "伏格列波糖", "米格列醇"),
    "DPP-4抑制剂": ("西格列汀", "利格列汀", "沙格列汀", "维格列汀", "阿格列汀"),
    "SGLT2抑制剂": ("达格列净", "恩格列净", "卡格列净", "恒格列净"),
    "噻唑烷二酮类": ("吡格列酮", "罗格列酮"),
    "格列奈类": ("瑞格列奈", "那格列奈"),
    "GLP-1受体激动剂": ("利拉鲁肽", "司美格鲁肽", "度拉糖肽", "艾塞那肽", "利司那肽", "贝那鲁肽", "洛塞那肽"),
    "胰岛素": ("德谷门冬双胰岛素", "门冬胰岛素", "赖脯胰岛素", "谷赖胰岛素", "甘精胰岛素", "地特胰岛素", "德谷胰岛素",
             "精蛋白生物合成人胰岛素", "精蛋白锌重组人胰岛素", "精蛋白人胰岛素", "生物合成人胰岛素",
             "重组人胰岛素", "胰岛素"),
    "钙通道阻滞剂": ("左旋氨氯地平", "氨氯地平", "硝苯地平", "非洛地平"),
    "ARB": ("缬沙坦", "厄贝沙坦", "氯沙坦", "替米沙坦", "坎地沙坦", "奥美沙坦"),
    "ACEI": ("贝那普利", "依那普利", "培哚普利", "卡托普利", "福辛普利"),
    "β受体阻滞剂": ("美托洛尔", "比索洛尔"),
    "利尿剂": ("氢氯噻嗪", "吲达帕胺"),
    "他汀类": ("阿托伐他汀", "瑞舒伐他汀", "辛伐他汀", "普伐他汀", "匹伐他汀"),
    "其他调脂药": ("非诺贝特", "依折麦布"),
    "抗血小板药": ("阿司匹林", "氯吡格雷", "替格瑞洛"),
    "硝酸酯类": ("单硝酸异山梨酯", "硝酸异山梨酯", "硝酸甘油"),
    "神经病变用药": ("甲钴胺", "依帕司他", "硫辛酸"),
    "微循环用药": ("羟苯磺酸钙", "胰激肽原酶"),
}
DRUGS: dict[str, str] = {g: cls for cls, gens in DRUG_CLASSES.items() for g in gens}

#: brand and short names -> generic name (in the record: drug_name_nonstandard)
BRAND_NAMES: dict[str, str] = {
    "格华止": "二甲双胍", "拜糖平": "阿卡波糖", "卡博平": "阿卡波糖", "亚莫利": "格列美脲", "万苏平": "格列美脲",
    "达美康": "格列齐特", "瑞易宁": "格列吡嗪", "糖适平": "格列喹酮", "捷诺维": "西格列汀", "欧唐宁": "利格列汀",
    "安立泽": "沙格列汀", "佳维乐": "维格列汀", "安达唐": "达格列净", "欧唐静": "恩格列净", "诺和龙": "瑞格列奈",
    "艾可拓": "吡格列酮", "诺和力": "利拉鲁肽", "诺和泰": "司美格鲁肽", "度易达": "度拉糖肽", "百泌达": "艾塞那肽",
    "诺和锐": "门冬胰岛素", "优泌乐": "赖脯胰岛素", "来得时": "甘精胰岛素", "长秀霖": "甘精胰岛素",
    "诺和平": "地特胰岛素", "诺和达": "德谷胰岛素", "诺和灵": "重组人胰岛素", "优泌林": "重组人胰岛素",
    "甘舒霖": "重组人胰岛素", "络活喜": "氨氯地平", "拜新同": "硝苯地平", "代文": "缬沙坦", "安博维": "厄贝沙坦",
    "科素亚": "氯沙坦", "洛汀新": "贝那普利", "倍他乐克": "美托洛尔", "立普妥": "阿托伐他汀",
    "拜阿司匹灵": "阿司匹林", "波立维": "氯吡格雷", "弥可保": "甲钴胺",
    # short forms of insulin names
    "甘精": "甘精胰岛素", "门冬": "门冬胰岛素", "赖脯": "赖脯胰岛素", "地特": "地特胰岛素", "德谷": "德谷胰岛素",
}

#: class words that stand in for a drug name -> the classes they cover
CLASS_WORDS: dict[str, frozenset[str]] = {
    "降糖药": frozenset(c for c in DRUG_CLASSES if c not in {
        "钙通道阻滞剂", "ARB", "ACEI", "β受体阻滞剂", "利尿剂", "他汀类", "其他调脂药", "抗血小板药",
        "硝酸酯类", "神经病变用药", "微循环用药"}),
    "降压药": frozenset({"钙通道阻滞剂", "ARB", "ACEI", "β受体阻滞剂", "利尿剂"}),
    "降脂药": frozenset({"他汀类", "其他调脂药"}),
    "调脂药": frozenset({"他汀类", "其他调脂药"}),
    "他汀": frozenset({"他汀类"}),
}

#: measurement kind -> (label, keywords); "bp" is found by its N/N pattern
MEASURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "fpg": ("空腹血糖", ("空腹指尖血糖", "空腹静脉血糖", "空腹血糖", "空腹", "FPG", "FBG")),
    "ppg": ("餐后2小时血糖", ("餐后2小时血糖", "餐后两小时血糖", "餐后二小时血糖", "餐后2h血糖", "餐后血糖",
                         "饭后2小时血糖", "饭后两小时血糖", "饭后血糖", "餐后2小时", "餐后两小时", "餐后2h",
                         "饭后2小时", "饭后两小时", "2hPG", "PPG", "餐后", "饭后")),
    "rbg": ("随机血糖", ("随机指尖血糖", "随机血糖")),
    "glucose": ("血糖", ("指尖血糖", "末梢血糖", "血糖")),
    "hba1c": ("糖化血红蛋白", ("糖化血红蛋白", "HbA1c", "HBA1C", "HbA1C", "A1c", "糖化")),
    "weight": ("体重", ("体重",)),
    "bmi": ("BMI", ("BMI", "体重指数")),
    "height": ("身高", ("身高",)),
    "tg": ("甘油三酯", ("甘油三酯", "TG")),
    "tc": ("总胆固醇", ("总胆固醇", "TC")),
    "ldl": ("低密度脂蛋白胆固醇", ("低密度脂蛋白胆固醇", "低密度脂蛋白", "LDL-C", "LDL")),
    "hdl": ("高密度脂蛋白胆固醇", ("高密度脂蛋白胆固醇", "高密度脂蛋白", "HDL-C", "HDL")),
    "cr": ("肌酐", ("血肌酐", "肌酐", "Scr", "Cr")),
    "ua": ("尿酸", ("血尿酸", "尿酸")),
    "egfr": ("eGFR", ("eGFR",)),
    "uacr": ("尿白蛋白/肌酐比值", ("尿微量白蛋白/肌酐比值", "尿微量白蛋白/肌酐比", "尿白蛋白/肌酐比值", "UACR")),
    "hr": ("心率", ("心率",)),
}
GLUCOSE_KINDS = frozenset({"fpg", "ppg", "rbg", "glucose"})
#: kinds whose omission from the record is not a deduction
OPTIONAL_KINDS = frozenset({"height", "hr", "weight_change"})

#: past-history diseases: (deduction type, label, pattern)
PAST_DISEASES: tuple[tuple[str, str, str], ...] = (
    ("ph_hypertension_missing", "高血压", r"高血压|血压(?:也|有点|有些|一直|比较|偏|都|挺|还)*(?:偏高|高)(?![于达])"),
    ("ph_hyperlipidemia_missing", "高脂血症",
     r"高血脂|高脂血症|血脂异常|高甘油三酯|高胆固醇|(?:血脂|胆固醇|甘油三酯)(?:也|有点|有些|一直|比较|偏|都|挺|还)*(?:偏高|高|异常)(?![于达])"),
    ("ph_chd_missing", "冠心病", r"冠心病|冠状动脉粥样硬化性心脏病|心肌梗死|心梗|心绞痛|支架"),
    ("ph_other_missing", "脑卒中", r"脑梗死|脑梗|脑卒中|中风|脑出血"),
    ("ph_other_missing", "痛风", r"痛风"),
    ("ph_other_missing", "甲状腺疾病", r"甲亢|甲减|甲状腺功能亢进|甲状腺功能减退|桥本"),
    ("ph_other_missing", "慢性肺病", r"慢阻肺|慢性阻塞性肺|哮喘"),
)
DIABETES_TOPIC = r"糖尿病"

#: family-history diseases: (deduction type, label, pattern)
FAMILY_DISEASES: tuple[tuple[str, str, str], ...] = (
    ("fh_diabetes_missing", "糖尿病", r"糖尿病|血糖(?:也|都|一直|有点)*高"),
    ("fh_other_missing", "高血压", r"高血压|血压(?:也|都|一直|有点)*高"),
    ("fh_other_missing", "冠心病", r"冠心病|心梗|心肌梗死"),
    ("fh_other_missing", "脑卒中", r"脑梗死|脑梗|脑卒中|中风|脑出血"),
)

#: personal-history topics: (label, conversation pattern, record pattern)
PERSONAL_TOPICS: tuple[tuple[str, str, str], ...] = (
    ("吸烟", r"抽烟|吸烟|烟(?:瘾|龄)|抽(?:了|过)?[^,;。]{0,4}烟|戒烟|支烟|包烟", r"吸烟|抽烟|烟"),
    ("饮酒", r"喝酒|饮酒|酒(?:量|瘾)|白酒|啤酒|红酒|黄酒|戒酒", r"饮酒|喝酒|酒"),
    ("饮食", (r"饮食|口味|甜食|爱吃|喜欢吃|爱喝|喜欢喝|油腻|零食|饮料|可乐|奶茶|主食|少油|少盐|偏咸|"
             r"吃得(?:比较|很|挺)?(?:咸|油|甜)"),
     r"饮食|膳食|甜食|油腻|口味|零食|饮料|奶茶|主食|进食|喜食|喜饮|嗜|低盐|低脂|偏咸|面食|米饭"),
    ("运动", r"运动|锻炼|散步|跑步|健身|快走|打球|踢球|[足篮排网羽]球|乒乓球|游泳|广场舞|太极|骑车|爬山|瑜伽",
     r"运动|锻炼|散步|跑步|健身|步行|快走|活动量|太极|广场舞|久坐|游泳|骑车|打球|踢球|[足篮排网羽]球|乒乓球|爬山|瑜伽"),
)

#: complications stated in the conversation that the record must carry: (label, conversation pattern,
#: record pattern; the record may word it more loosely)
DIAGNOSES: tuple[tuple[str, str, str], ...] = (
    ("糖尿病肾病/慢性肾脏病", r"糖尿病肾病|慢性肾脏病|慢性肾病|(?<![A-Za-z])(?:CKD|DKD)(?![A-Za-z])",
     r"糖尿病肾|肾病|肾脏病|肾脏疾病|(?<![A-Za-z])(?:CKD|DKD)(?![A-Za-z])"),
    ("糖尿病视网膜病变", r"视网膜病变", r"视网膜病变|眼底病变|(?<![A-Za-z])DR(?![A-Za-z])"),
    ("糖尿病周围神经病变", r"周围神经病变", r"神经病变|(?<![A-Za-z])DPN(?![A-Za-z])"),
    ("糖尿病足", r"糖尿病足", r"糖尿病足|足溃疡|足部溃疡"),
    ("糖尿病酮症酸中毒", r"酮症酸中毒", r"酮症"),
)

#: present-illness parts: (deduction type, label, pattern of words that show the part is there); see
#: PRESENT_ILLNESS_SAID for what the conversation must say for a part to be required
PRESENT_ILLNESS_PARTS: tuple[tuple[str, str, str], ...] = (
    ("pi_initial_diagnosis_missing", "初次诊断情况", r"诊断|确诊|诊为|发现|查出|体检|起病|发病|首次|初次|出现"),
    ("pi_treatment_missing", "治疗历程",
     r"治疗|服用|口服|注射|用药|服药|药物|胰岛素|饮食控制|控制饮食|运动|未予|予|加用|停用|调整|" + "|".join(DRUGS)),
    ("pi_recent_missing", "近期病情",
     (r"目前|现在|现为|现口服|现用|现血糖|近\d|近[一两二三四五六七八九十半几]|近期|近来|最近|本次|此次|今年|今日|今天|"
      r"监测|自测|复查|就诊|来院|来诊|门诊|入院|仍|持续|加重|好转|控制不佳|控制欠佳|控制可|控制尚可|控制良好|波动|"
      r"近日|当前|刻下|这次|本月|上周|昨日|昨天|今晨|(?<![出发表体实再呈])现(?![病史])|"
      r"\d{1,2}\s*月\s*\d{1,2}\s*日|\d{1,2}\s*月份|(?:19|20)\d\d\s*年\s*\d{1,2}\s*月|"
      r"[\d一二两三四五六七八九十半]+\s*(?:天|日|周|星期|个月|月)(?:以来|来|前)")),
    ("pi_complications_missing", "并发症情况",
     (r"并发症|视物模糊|视力|眼底|视网膜|白内障|麻木|疼痛|感觉|蛋白|泡沫尿|肾|神经|足|水肿|心悸|胸闷|跛行|皮肤|"
      r"伤口|溃疡|酮症|低血糖|心脑血管")),
)

#: what in the conversation shows that it gives a present-illness part (the record cannot be asked for
#: what was not said): a treatment the patient affirms (besides a drug in use), a recent course spoken of
#: (by anyone: today's values are the visit's), complications spoken of either way (有没有手脚麻？没有)
PRESENT_ILLNESS_SAID: dict[str, str] = {
    "pi_treatment_missing": (r"吃药|服药|用药|吃[^,;。]{0,6}药|打针|打胰岛素|治疗|控制饮食|饮食控制|管住嘴|少吃|节食|"
                             r"运动|锻炼|降糖药|胰岛素"),
    "pi_recent_missing": (r"最近|近来|近期|这段时间|这阵子|这些天|这几天|这两天|现在|目前|今天|今日|今早|这次|这回|"
                          r"近\s*\d|近[一二两三四五六七八九十半几数]|这(?:一|两|几|半)?个?(?:月|周|星期|年)|上周|上个月|"
                          r"前几天|前两天|[\d一二两三四五六七八九十半]+\s*(?:天|周|个?月)(?:以)?来"),
    "pi_complications_missing": (r"并发症|麻|模糊|看不清|视力|眼底|眼睛|视网膜|白内障|疼|痛|蛋白|泡沫|肾|神经|脚|足|肿|"
                                 r"心慌|心悸|胸闷|伤口|溃疡|酮症|低血糖|心脏|中风|脑梗"),
}

#: common symptoms of a diabetes consultation, a closed list: (label, record pattern, conversation pattern of
#: a statement of the symptom (either way: 口干 / 不口干), conversation pattern of any mention of it, however
#: loose). The statement patterns decide what the patient affirms or denies; the mention patterns what the
#: conversation never speaks of (a symptom the record affirms that nobody mentioned).
SYMPTOMS: tuple[tuple[str, str, str, str], ...] = (
    ("口干", r"口干|口渴|烦渴", r"口干|口渴|渴|[口嘴][^,;。不没]{0,3}干", r"[口嘴][^,;。]{0,4}干|嘴|渴|喝水"),
    ("多饮", r"多饮|饮水(?:量)?增多|烦渴", r"多饮|喝水(?:也|很|特别|比较)?多|水喝得(?:很|特别)?多|喝很多水|想喝水",
     r"多饮|饮水|喝[^,;。]{0,8}水|水喝|渴|喝得多|能喝"),
    ("多尿", r"多尿|尿量增多|尿频|夜尿",
     r"多尿|尿频|夜尿|起夜|尿(?:也|很|特别|比较)?多|小便(?:也|很|特别|比较)?(?:多|频)|上厕所",
     r"尿|小便|起夜|厕所|夜里"),
    ("多食", r"多食|易饥|食欲亢进|食量增加", r"多食|饿|吃得(?:也|很|特别)?多|饭量(?:也|很|特别)?大|能吃",
     r"饿|吃[^,;。]{0,4}多|饭量|食欲|胃口|多食|能吃|嘴馋"),
    ("体重下降", r"体重(?:明显)?(?:下降|减轻|减少)|消瘦", r"瘦|体重(?:也)?(?:下降|减轻|掉|少)|掉秤",
     r"瘦|体重|斤|公斤|kg|掉秤|轻了"),
    ("乏力", r"乏力|疲乏|疲劳|倦怠", r"乏力|没(?:什么|啥|有)?(?:劲|力气|精神)|无力|累|疲",
     r"乏力|劲|力气|无力|累|疲|乏|精神|困|虚|软|蔫"),
    ("视物模糊", r"视物模糊|视力(?:下降|减退|模糊)|视物不清",
     r"视物模糊|模糊|看不清|眼花|视力(?:下降|差|不好)|看东西(?:花|不清)", r"模糊|看[^,;。]{0,4}清|看东西|视力|眼|花"),
    ("肢体麻木", r"麻木|发麻", r"麻(?!烦|醉|将|辣|油)", r"麻(?!烦|醉|将|辣|油)|感觉|木"),
    ("皮肤瘙痒", r"瘙痒|皮肤痒", r"痒", r"痒"),
    ("头晕", r"头晕|眩晕|头昏", r"头晕|头昏|晕", r"晕|头昏|头"),
    ("心悸", r"心悸|心慌", r"心慌|心悸|心跳(?:快|得快|加快)|心里发慌", r"心慌|心悸|心跳|心里|慌"),
    ("胸闷", r"胸闷|胸痛", r"胸闷|胸口(?:闷|疼|痛)|胸痛", r"胸|心口|闷"),
    ("泡沫尿", r"泡沫尿|尿(?:中|里)?(?:有)?泡沫", r"泡沫", r"泡"),
    ("水肿", r"水肿|浮肿", r"水肿|浮肿|肿(?!瘤)", r"肿|胀"),
    ("多汗", r"多汗|出汗|大汗", r"出汗|多汗|冒汗|汗多", r"汗"),
    ("溃疡", r"溃疡|破溃|溃烂", r"溃疡|溃烂|破(?:了|溃|口)|烂", r"溃|破|烂|伤口|口子|疮|创面"),
    ("腹泻", r"腹泻", r"拉肚子|腹泻|拉稀", r"拉肚子|腹泻|拉稀|大便|拉"),
    ("恶心呕吐", r"恶心|呕吐", r"恶心|想吐|呕吐", r"恶心|吐|反胃"),
    ("低血糖", r"低血糖", r"低血糖|血糖(?:偏|很|有点)?低(?![于到])", r"低血糖|血糖(?:偏|很|有点)?低|低|心慌|出汗|手抖"),
)
#: symptoms whose absence from the conversation the rules do not read as "never said": a low glucose is
#: often told as a value (最低2.9)
SYMPTOMS_NOT_UNSAID = frozenset({"低血糖"})
#: symptoms told at a limb (手麻 / 脚麻, 脚肿): a statement naming the hands or the feet only is of those
SYMPTOMS_AT_LIMBS = frozenset({"肢体麻木", "水肿", "溃疡"})

#: habits the record may state against the conversation: (label, record pattern, conversation statement pattern,
#: conversation pattern of a denial in other words: 不抽不喝)
HABITS: tuple[tuple[str, str, str, str], ...] = (
    ("吸烟", r"吸烟|抽烟", r"抽烟|吸烟|抽(?:了|过)?[^,;。]{0,4}烟", r"(?:不|没|从不|从来不)(?:抽|吸)(?!完|血)"),
    ("饮酒", r"饮酒|喝酒", r"喝酒|饮酒|喝(?:点|些|了|过)?(?:白|啤|红|黄)?酒|酒(?:量|瘾)",
     r"(?:不|没|从不|从来不)(?:喝|饮)(?!水|饮料|奶|茶|可乐|汤|粥)"),
)

#: comorbidities the patient denies in other words (血压正常, 心脏没事): label -> conversation pattern
DISEASES_DENIED_AS: dict[str, str] = {
    "高血压": r"血压(?:[、和]?血脂)?(?:一直|也|都|还)?(?:正常|不高|还行|挺好|没问题|没事)",
    "高脂血症": r"血脂(?:[、和]?血压)?(?:一直|也|都|还)?(?:正常|不高|还行|挺好|没问题|没事)",
    "冠心病": r"心脏(?:一直|也|都|还)?(?:没事|没病|没问题|没毛病|正常|挺好|好)",
}
#: comorbidities a doctor's question may ask about in other words (血压、血脂、心脏怎么样？): label -> pattern
DISEASES_ASKED_AS: dict[str, str] = {
    "高血压": r"血压", "高脂血症": r"血脂|胆固醇", "冠心病": r"心脏|冠心", "脑卒中": r"脑血管|脑梗|中风",
}
#: comorbidities a drug in use stands for (an antihypertensive: the patient has hypertension, however the
#: conversation words it): label -> drug classes
DISEASE_DRUG_CLASSES: dict[str, frozenset[str]] = {
    "高血压": frozenset({"钙通道阻滞剂", "ARB", "ACEI", "β受体阻滞剂", "利尿剂"}),
    "高脂血症": frozenset({"他汀类", "其他调脂药"}),
    "冠心病": frozenset({"硝酸酯类"}),
}
