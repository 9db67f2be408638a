#!/bin/bash
awk '!seen[$0]++' /app/nectar.txt > /app/timber_unique.txt
