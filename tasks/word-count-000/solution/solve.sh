#!/bin/bash
wc -l < /app/docs/clever_feather.txt > /app/answer.txt
