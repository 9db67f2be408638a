#!/bin/bash
sed -n '17,20p' /app/granite/clever_glacier.txt > /app/castle_excerpt.txt
