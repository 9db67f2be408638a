#!/bin/bash
chmod 444 /app/basket/windy_harp.txt
chmod 600 /app/basket/golden_otter.key
chmod 700 /app/basket/lively_poppy.sh
