"""ISO 4217 currency codes accepted on billing events, with their minor units.

The minor unit is the number of decimal places the currency is quoted in (USD 2, JPY 0,
KWD 3). Validation uses the codes only: amounts may carry up to ``AMOUNT_SCALE`` places
(sub-cent prices are common in usage billing); the minor units serve the generator.
"""

from __future__ import annotations

__all__ = ["MINOR_UNITS", "CURRENCY_CODES"]

_BY_MINOR_UNIT = {
    0: "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF",
    2: (
        "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BRL BSD BTN BWP BYN "
        "BZD CAD CDF CHF CNY COP CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS "
        "GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR "
        "LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD "
        "PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN "
        "SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD UZS VES WST XCD YER ZAR ZMW ZWL"
    ),
    3: "BHD IQD JOD KWD LYD OMR TND",
    4: "CLF UYW",
}

MINOR_UNITS: dict[str, int] = {code: places for places, codes in _BY_MINOR_UNIT.items() for code in codes.split()}

CURRENCY_CODES: tuple[str, ...] = tuple(sorted(MINOR_UNITS))
