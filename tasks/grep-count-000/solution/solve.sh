#!/bin/bash
grep -c 'rabbit' /app/logs/spruce.log > /app/basket_count.txt
